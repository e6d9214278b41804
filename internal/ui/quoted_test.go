package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// An error page quotes the form value at fault, and quoting escapes it
// twice (%q, then the page's HTML): a form of 1 MiB of " (the form bound)
// made a page of about 6 MiB, built in memory for every such request. Each
// value is cut to 4 KiB before it is quoted, as the API does.
func TestErrorPageQuotesAtMost4KiB(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, csrf := b.loggedIn()
	big := strings.Repeat(`"`, 1<<20-4096) // raw in the form: a parser takes it as it is
	for _, tc := range []struct{ name, path, field string }{
		{"replay one=", "/ui/dead/replay", "one"},
		{"replay id=", "/ui/dead/replay", "id"},
		{"purge id=", "/ui/dead/purge", "id"},
		{"purge channel=", "/ui/dead/purge", "channel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "csrf=" + url.QueryEscape(csrf) + "&" + tc.field + "=" + big
			req, _ := http.NewRequest(http.MethodPost, b.url+tc.path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", b.url)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			res := c.do(req)
			if res.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body: %.300s", res.status, res.body)
			}
			if len(res.body) > 64<<10 {
				t.Fatalf("a %d-byte form answered a %d-byte page: the error quotes the value whole", len(body), len(res.body))
			}
			if !strings.Contains(res.body, `\&#34;\&#34;\&#34;`) || !strings.Contains(res.body, "truncated") {
				t.Errorf("the page does not quote the value, cut: %.2000s", res.body)
			}
		})
	}
}
