package sdk

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A long detail with bytes that are not UTF-8 (a Latin-1 error page) is sent
// whole up to the bound, each invalid byte as U+FFFD. It was cut before its
// first invalid byte — "Erreur: destinataire refus…" of a 2,828-byte reason
// — by a loop that dropped a byte at a time until the rest was valid.
func TestValidate_detailNotUTF8(t *testing.T) {
	t.Parallel()
	page := "Erreur: destinataire refus\xe9. " + strings.Repeat("D\xe9tail de l'erreur. ", 150)
	v := validate(Verdict{Outcome: OutcomePermanent, Detail: page, ProviderCode: strings.Repeat("\xff", 300)})
	if !utf8.ValidString(v.Detail) || len(v.Detail) > maxDetail+len("…") || len(v.Detail) < maxDetail-3 {
		t.Errorf("detail: %d bytes, valid UTF-8 %v; want valid and cut at about %d", len(v.Detail), utf8.ValidString(v.Detail), maxDetail)
	}
	if !strings.HasPrefix(v.Detail, "Erreur: destinataire refus\uFFFD. D\uFFFDtail") {
		t.Errorf("detail begins %.60q; want the reason with U+FFFD for its invalid bytes", v.Detail)
	}
	if !utf8.ValidString(v.ProviderCode) || len(v.ProviderCode) > maxProviderCode+len("…") {
		t.Errorf("provider code: %d bytes, valid %v; want valid and at most %d", len(v.ProviderCode), utf8.ValidString(v.ProviderCode), maxProviderCode)
	}
	for _, n := range []int{0, 1, 2, 3, 4, 5} {
		if got := truncate("añb€c", n); !utf8.ValidString(got) || len(got) > n+len("…") {
			t.Errorf("truncate(%q, %d) = %q", "añb€c", n, got)
		}
	}
}
