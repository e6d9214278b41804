package schedule

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzRender compiles an arbitrary template as a payload leaf and renders it
// for one small subscriber. Whatever the text: no panic; a compile error, a
// render error (a bound's names the bound), or a payload within the payload
// bound; and the large objects the render allocated within the memory
// bound's worst case (largeAllocBytes: a bomb shows there, the interpreter's
// garbage and stacks do not). The seeds in testdata/fuzz/FuzzRender are the
// issue 26 bombs and their variants.
func FuzzRender(f *testing.F) {
	const limit = 16 << 10 // small, so a bomb meets its bound in few steps
	data, err := decodeData([]byte(`{"title":"Cats","n":3,"l":[1,2,3],"m":{"a":"b"},"s":"<a href='x'>&\"</a>"}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(`Quiz for {{.recipient}}: {{.data.title}}`)
	f.Fuzz(func(t *testing.T, text string) {
		p, err := compilePayload(map[string]any{"t": text})
		if err != nil {
			return
		}
		vars := newVars(time.Date(2024, 3, 10, 8, 0, 0, 0, time.UTC), "daily-quiz")
		vars[varRecipient], vars[varData] = "u-1", data
		before, start := largeAllocBytes(), time.Now()
		out, err := p.render(nil, vars, limit)
		grew, took := largeAllocBytes()-before, time.Since(start)
		switch {
		case errors.Is(err, errRenderBound) && !strings.HasSuffix(err.Error(), errRenderBound.Error()):
			t.Errorf("a bound's error does not end naming it: %.300s", err)
		case err == nil && (len(out) > limit || !json.Valid(out)):
			t.Errorf("rendered %d bytes (valid JSON: %t), want valid JSON within %d", len(out), json.Valid(out), limit)
		}
		// The built bound, fmt's doubling and copy of it, the output's
		// builder and the JSON it is appended to.
		if most := uint64(4*RenderMemoryFactor*limit + 8*limit); grew > most {
			t.Errorf("one render allocated %d KiB in large objects, want at most %d KiB", grew>>10, most>>10)
		}
		// Generous: the bound is maxRenderTime; this catches a render that
		// never checks the clock, not a slow machine.
		if took > time.Minute {
			t.Errorf("one render took %s, want about %s at most", took, maxRenderTime)
		}
	})
}
