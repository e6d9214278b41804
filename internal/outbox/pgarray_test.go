package outbox

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestArrayParams_EncodeAsPgx: each array parameter type puts on the wire
// exactly the bytes pgx writes for the plain slice it replaces, in both
// formats, NULL elements and a nil (NULL) array included, and it does so
// without an allocation per element.
// (Not parallel: testing.AllocsPerRun counts the whole process's.)
func TestArrayParams_EncodeAsPgx(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 123456000, time.UTC)
	cases := []struct {
		name      string
		oid       uint32
		ours, pgx any
	}{
		{"bigint[]", pgtype.Int8ArrayOID, int8Array{1, 255, 256, 1 << 40, -7}, []int64{1, 255, 256, 1 << 40, -7}},
		{"bigint[] empty", pgtype.Int8ArrayOID, int8Array{}, []int64{}},
		{"bigint[] nil", pgtype.Int8ArrayOID, int8Array(nil), []int64(nil)},
		{"int[]", pgtype.Int4ArrayOID, int4Array{0, 200, 503, -1, 1<<31 - 1}, []int32{0, 200, 503, -1, 1<<31 - 1}},
		{"text[]", pgtype.TextArrayOID, textArray{"", "SENT", `a "quoted" \ {b,c}`, "NULL", "é"}, []string{"", "SENT", `a "quoted" \ {b,c}`, "NULL", "é"}},
		{"timestamptz[]", pgtype.TimestamptzArrayOID,
			timestamptzArray{{Time: now, Valid: true}, {}, {Time: now.Add(time.Hour), Valid: true}},
			[]pgtype.Timestamptz{{Time: now, Valid: true}, {}, {Time: now.Add(time.Hour), Valid: true}}},
	}
	m := pgtype.NewMap()
	for _, c := range cases {
		for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
			got, err := m.Encode(c.oid, format, c.ours, nil)
			if err != nil {
				t.Fatalf("%s format %d: encode ours: %v", c.name, format, err)
			}
			want, err := m.Encode(c.oid, format, c.pgx, nil)
			if err != nil {
				t.Fatalf("%s format %d: encode pgx's: %v", c.name, format, err)
			}
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Errorf("%s format %d:\n got %q\nwant %q", c.name, format, got, want)
			}
		}
	}

	// 1,000 elements: the buffer and the dimensions allocate, the elements not.
	ids, texts := make(int8Array, 1000), make(textArray, 1000)
	for i := range ids {
		ids[i], texts[i] = int64(1e9+i), "text"
	}
	buf := make([]byte, 0, 64<<10)
	for _, v := range []struct {
		oid   uint32
		array any
	}{{pgtype.Int8ArrayOID, ids}, {pgtype.TextArrayOID, texts}} {
		if n := testing.AllocsPerRun(10, func() {
			if _, err := m.Encode(v.oid, pgtype.BinaryFormatCode, v.array, buf[:0]); err != nil {
				t.Fatal(err)
			}
		}); n > 4 {
			t.Errorf("encoding %T of 1,000: %v allocations, want a few", v.array, n)
		}
	}
}
