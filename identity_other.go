//go:build !unix

package notifyd

import (
	"errors"
	"os"
)

// Without flock the id cannot be held: a fresh one per start.
func lockFile(*os.File) error   { return errors.New("no file locks on this platform") }
func unlockFile(*os.File) error { return nil }
