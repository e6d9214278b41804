package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/notifyd/notifyd/internal/jsonindent"
	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/wire"
)

// The operator commands talk to a running notifyd's HTTP API: --addr (or
// NOTIFYD_ADDR) and --token (or NOTIFYD_TOKEN). Commands that can also work
// on the database directly (send, status, subscribers, campaign, jobs) do so
// when given --config, and use the API otherwise.

// Environment variables of the API commands.
const (
	envAddr  = "NOTIFYD_ADDR"
	envToken = "NOTIFYD_TOKEN"
)

const defaultAddr = "http://127.0.0.1:8080"

// apiFlags are the flags every API command takes.
type apiFlags struct {
	addr, token, output string
	// direct: the command also takes --config (the database directly), so
	// its hints may suggest it; the API-only commands' never do.
	direct bool
}

// addAPIFlags adds --addr, --token and -o to fs. The token's default is not
// shown in --help (it is a secret): it is read from the environment at use.
func addAPIFlags(fs *pflag.FlagSet, f *apiFlags) {
	addr := os.Getenv(envAddr)
	if addr == "" {
		addr = defaultAddr
	}
	fs.StringVar(&f.addr, "addr", addr, "notifyd API address; env "+envAddr)
	fs.StringVar(&f.token, "token", "", "API bearer token, one of http.tokens; env "+envToken)
	fs.StringVarP(&f.output, "output", "o", "table", "output: table (for people) or json (for scripts)")
}

// client returns an API client, refusing to run without a token.
func (f *apiFlags) client() (*client.Client, error) {
	if err := f.checkOutput(); err != nil {
		return nil, err
	}
	token := f.token
	if token == "" {
		token = os.Getenv(envToken)
	}
	if token == "" {
		msg := "no API token: pass --token or set " + envToken + " (one of the server's http.tokens)"
		if f.direct {
			msg += ", or use --config to work on the database directly"
		}
		return nil, errors.New(msg)
	}
	return client.New(f.addr, token, client.WithHTTPClient(&http.Client{
		Timeout: client.DefaultTimeout, Transport: traceTransport{reachTransport{http.DefaultTransport}},
	}))
}

func (f *apiFlags) checkOutput() error {
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("-o %q: want table or json", f.output)
	}
	return nil
}

func (f *apiFlags) json() bool { return f.output == "json" }

// printable is how the CLI prints every string it did not write itself: a
// stored one (a recipient any API client chose, a provider's error, a pause
// reason) or one a server answered. Its control characters are escaped
// (wire.EscapeControls: ESC shows as \x1b), so OSC 52 cannot write the
// operator's clipboard, nor CSI clear the screen, nor \r overwrite a line.
func printable(s string) string { return wire.EscapeControls(s) }

// printJSON writes v indented, for scripts (-o json), or on one line when
// indenting would make it more than twice as long (jsonindent.Fits): a
// payload is JSON of any nesting, indentation grows with the square of it,
// and a 1 MiB payload of 9,000-deep chains printed about 9 GB to the
// operator's terminal. Either is the same JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if jsonindent.Fits(b) {
		var ib bytes.Buffer
		if err := json.Indent(&ib, b, "", jsonindent.Indent); err != nil {
			return err
		}
		b = ib.Bytes()
	}
	_, err = w.Write(jsonControls(append(b, '\n')))
	return err
}

// jsonControls escapes DEL and the C1 controls in JSON that encoding/json
// wrote, which escapes the C0 ones only: a terminal acts on U+009B as it
// does on ESC [. The JSON means the same (they are only ever in strings).
// A byte that is not UTF-8 is written \ufffd, as encoding/json writes one in
// a string it encodes: a payload or result (json.RawMessage) passes through
// encoding/json as the server sent it, and a raw 0x9b is CSI on a terminal
// that reads 8-bit controls.
func jsonControls(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == 0x7f || (r >= 0x80 && r < 0xa0) || (r == utf8.RuneError && n == 1) {
			if out == nil {
				out = append(make([]byte, 0, len(b)+16), b[:i]...)
			}
			out = fmt.Appendf(out, `\u%04x`, r)
		} else if out != nil {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	if out == nil {
		return b
	}
	return out
}

// newTable is the tab writer every human table uses.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// parseIDs reads notification or job ids from arguments.
func parseIDs(args []string, what string) ([]int64, error) {
	ids := make([]int64, len(args))
	for i, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%q is not a %s id", a, what)
		}
		ids[i] = id
	}
	return ids, nil
}
