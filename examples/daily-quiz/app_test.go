package dailyquiz_test

import (
	"os"
	"testing"

	"github.com/notifyd/notifyd/internal/testenv"
)

// appDB is a database of its own with the application's tables from
// schema.sql, holding the rows in seed (SQL).
func appDB(t *testing.T, seed string) *testenv.DB {
	t.Helper()
	db := testenv.NewDB(t)
	ctx := testenv.Context(t)
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, string(schema)); err != nil {
		t.Fatalf("schema.sql: %v", err)
	}
	if _, err := db.Pool.Exec(ctx, seed); err != nil {
		t.Fatalf("the test's rows: %v", err)
	}
	return db
}
