package outbox

import (
	"bytes"
	"fmt"
	"testing"
)

// TestPayloadArena: each copy equals its source and is its own (appending to
// one never writes into the next); NULL stays nil and an empty value is not
// nil; a payload too big to share a chunk gets its own allocation.
func TestPayloadArena(t *testing.T) {
	t.Parallel()
	a := payloadArena{rows: 300}
	var got [][]byte
	var want [][]byte
	for i := range 300 {
		src := []byte(fmt.Sprintf(`{"n":%d,"text":"Which planet has the most moons?"}`, i))
		want = append(want, bytes.Clone(src))
		got = append(got, a.copy(src))
		clear(src) // the driver's buffer is reused for the next row
	}
	_ = append(got[0], "overwrite"...)
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("copy %d = %s, want %s", i, got[i], want[i])
		}
	}
	if a.copy(nil) != nil {
		t.Error("copy(nil) is not nil: a NULL payload must stay nil")
	}
	if b := a.copy([]byte{}); b == nil || len(b) != 0 {
		t.Errorf("copy of an empty value = %v, want empty and not nil", b)
	}
	big := bytes.Repeat([]byte("x"), payloadChunk)
	if b := a.copy(big); !bytes.Equal(b, big) || cap(b) != len(big) {
		t.Errorf("copy of a %d-byte payload: len %d cap %d", len(big), len(b), cap(b))
	}
	lone := payloadArena{rows: 1}
	if b := lone.copy([]byte(`{"a":1}`)); cap(lone.chunk) != len(b) {
		t.Errorf("a lone payload's chunk holds %d bytes, want its %d", cap(lone.chunk), len(b))
	}
}
