package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestDecodeBase64Embedding(t *testing.T) {
	t.Parallel()
	floats := func(v ...float32) string {
		var b []byte
		for _, f := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	bytes := base64.StdEncoding.EncodeToString([]byte{0x80, 0xff, 0x00, 0x01, 0x7f})
	tests := []struct {
		dtype, b64, want string
	}{
		{"", floats(0.5, -0.25, 1e-7, 0.0123, -1), "[0.5,-0.25,1e-7,0.0123,-1]"},
		{"float", floats(0.03125, -0.0000012345678), "[0.03125,-0.0000012345678]"},
		{"int8", bytes, "[-128,-1,0,1,127]"},
		{"binary", bytes, "[-128,-1,0,1,127]"},
		{"uint8", bytes, "[128,255,0,1,127]"},
		{"ubinary", bytes, "[128,255,0,1,127]"},
		{"float", "", "[]"},
	}
	for _, tt := range tests {
		got, err := decodeBase64Embedding(tt.b64, tt.dtype)
		if err != nil || string(got) != tt.want {
			t.Errorf("decodeBase64Embedding(%s, %q) = %s, %v; want %s", tt.b64, tt.dtype, got, err, tt.want)
		}
	}

	for _, bad := range []struct{ b64, dtype, inErr string }{
		{"not base64!", "float", "base64"},
		{base64.StdEncoding.EncodeToString([]byte{1, 2, 3}), "float", "3 bytes"},
		{floats(float32(math.NaN())), "float", "NaN"},
		{floats(float32(math.Inf(1))), "", "Inf"},
	} {
		if _, err := decodeBase64Embedding(bad.b64, bad.dtype); err == nil || !strings.Contains(err.Error(), bad.inErr) {
			t.Errorf("decodeBase64Embedding(%q, %q) error = %v; want one saying %q", bad.b64, bad.dtype, err, bad.inErr)
		}
	}
}

// TestAppendFloat32: the stored numbers are what encoding/json writes for a
// float32, read back exactly, and never longer than the size estimate's
// storedFloatBytes-1 for |v| ≤ 1 (Voyage's embeddings are unit vectors).
func TestAppendFloat32(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		var f float32
		switch i % 3 {
		case 0:
			f = r.Float32()*2 - 1
		case 1:
			f = float32(r.NormFloat64() * math.Pow(10, -float64(r.IntN(12))))
			f = max(-1, min(1, f))
		default:
			f = math.Float32frombits(r.Uint32())
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) || math.Abs(float64(f)) > 1 {
				continue
			}
		}
		got := string(appendFloat32(nil, f))
		want, _ := json.Marshal(f)
		if got != string(want) {
			t.Fatalf("appendFloat32(%v) = %s; encoding/json writes %s", f, got, want)
		}
		if len(got) > storedFloatBytes-1 {
			t.Fatalf("appendFloat32(%v) = %s: %d bytes, over the estimate's %d", f, got, len(got), storedFloatBytes-1)
		}
	}
}

// TestNormalizeVector: JSON numbers from Voyage are written again as
// output_dtype's type holds them, whatever form they came in, or refused
// naming the value.
func TestNormalizeVector(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		dtype, in, want, err string
	}{
		{"", `[0.10000000149011612, -0.029999999329447746, 1e-7, 0]`, `[0.1,-0.03,1e-7,0]`, ""},
		{"float", `[ 1 , 2.0 ]`, `[1,2]`, ""},
		{"float", `[0.` + strings.Repeat("0", 4000) + `1]`, `[0]`, ""},
		{"float", `[1e39]`, "", "value 0 (1e39) is not a finite number"},
		{"int8", `[-128, 127, 5.0]`, `[-128,127,5]`, ""},
		{"int8", `[128]`, "", "value 0 (128) is not an integer from -128 to 127"},
		{"binary", `[1.5]`, "", "is not an integer"},
		{"uint8", `[0, 255]`, `[0,255]`, ""},
		{"ubinary", `[-1]`, "", "is not an integer from 0 to 255"},
		{"", `["1"]`, "", "value 0 is a string"},
		{"", `[]`, "", "no values"},
	} {
		got, n, err := normalizeVector(json.RawMessage(tt.in), tt.dtype)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s %.40s: err = %v, want %q", tt.dtype, tt.in, err, tt.err)
		case tt.err == "" && (err != nil || string(got) != tt.want || n != strings.Count(tt.want, ",")+1):
			t.Errorf("%s %.40s = %s (%d values), %v; want %s", tt.dtype, tt.in, got, n, err, tt.want)
		}
	}
}
