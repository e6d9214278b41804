package outbox

import (
	"fmt"
	"io/fs"
)

func subFS() (fs.FS, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return sub, nil
}
