package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/sdk/client"
)

// eachID runs f for every id of a multi-id command (status, cancel), so
// each id gets an answer: an id refused on its own (the API's 404 or 409,
// or the service's refusal with --config) is one "error:" line on stderr
// and the loop goes on; any other error (notifyd unreachable, a 5xx, a
// token refused or throttled: 401, 403, 429) stops the command, as every
// later id would fail the same way. The command
// exits 1 when any id was refused, after printing what it found.
func eachID(cmd *cobra.Command, ids []int64, f func(id int64) error) (refused int, err error) {
	for _, id := range ids {
		err := f(id)
		if err == nil {
			continue
		}
		msg, own := idRefusal(err)
		if !own {
			return refused, fmt.Errorf("notification %d: %w", id, err)
		}
		refused++
		fmt.Fprintln(cmd.ErrOrStderr(), "error:", printable(msg))
	}
	return refused, nil
}

// findEach reads each of ids with get (eachID: an id refused alone is an
// "error:" line and the others go on) and returns what it found, with
// refusedErr's error when some were not found.
func findEach[T any](cmd *cobra.Command, ids []int64, get func(context.Context, int64) (T, error)) ([]T, error) {
	found := make([]T, 0, len(ids))
	refused, err := eachID(cmd, ids, func(id int64) error {
		v, err := get(cmd.Context(), id)
		if err == nil {
			found = append(found, v)
		}
		return err
	})
	if err == nil {
		err = refusedErr(refused, len(ids), "found")
	}
	return found, err
}

// idRefusal is the reason an id alone was refused, and whether err is one.
// Over the API only a 404 (no such notification) or a 409 (its state
// forbids it) is the id's own: a 401 counted as one asked once per id and
// ended "5 of 5 notification(s) not found" for a wrong token.
func idRefusal(err error) (string, bool) {
	var api *client.Error
	if errors.As(err, &api) {
		if api.StatusCode == http.StatusNotFound || api.StatusCode == http.StatusConflict {
			return api.Message, true
		}
		return "", false
	}
	var op *notifyd.Error
	if errors.As(err, &op) {
		return op.Message, true
	}
	return "", false
}

// refusedErr is the exit of a multi-id command some of whose ids were
// refused (listed above it on stderr).
func refusedErr(refused, total int, what string) error {
	if refused == 0 {
		return nil
	}
	return &exitError{code: 1, err: fmt.Errorf("%d of %d notification(s) not %s (see above)", refused, total, what)}
}
