package main

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Encoding formats of the channel's encoding_format key.
const (
	// EncodingBase64 asks Voyage for each embedding as a base64 string of
	// its raw little-endian values, as Voyage's own Python client does:
	// about a third of the bytes of JSON numbers on the wire. The plugin
	// decodes it, so the stored result is JSON numbers either way.
	EncodingBase64 = "base64"
	// EncodingFloat leaves encoding_format out (Voyage: null): JSON numbers
	// on the wire.
	EncodingFloat = "float"
)

// Bytes of one value in the stored JSON form (with its comma), per
// output_dtype. A float32 is written in its shortest round-tripping form,
// as encoding/json writes one: at most 9 significant digits. Voyage's
// embeddings are normalized to length 1, so |v| ≤ 1 and the longest is
// "-0.0000012345678" (17 bytes, for 1e-6 ≤ |v| < 1e-5; smaller values are
// written with an exponent, "-1.2345678e-7"). Typical values ("-0.01234567")
// take about 12: the estimate is an upper bound by about half.
const (
	storedFloatBytes = 18 // -0.0000012345678,
	storedInt8Bytes  = 5  // -128,
	storedUint8Bytes = 4  // 255,
)

// Bytes of one value in Voyage's answer with encoding_format left out:
// Python's repr of a float32 widened to float64 (up to 17 significant
// digits, "-1.2345678901234567e-05") and ", ".
const (
	wireFloatBytes = 25
	wireInt8Bytes  = 6 // -128,
)

// dtypeInfo says how output_dtype's values are stored: how many values a
// dimension count gives, their raw size in the base64 form, and the JSON
// bytes of each stored and on the wire with encoding_format left out.
func dtypeInfo(dtype string, dims int) (values, rawBytes, stored, wire int) {
	switch dtype {
	case "int8":
		return dims, 1, storedInt8Bytes, wireInt8Bytes
	case "uint8":
		return dims, 1, storedUint8Bytes, wireInt8Bytes
	case "binary":
		// Bit-packed: 8 dimensions a byte, as int8 (offset binary).
		return (dims + 7) / 8, 1, storedInt8Bytes, wireInt8Bytes
	case "ubinary":
		return (dims + 7) / 8, 1, storedUint8Bytes, wireInt8Bytes
	}
	return dims, 4, storedFloatBytes, wireFloatBytes // float, or unset
}

// decodeBase64Embedding turns Voyage's base64 embedding into a JSON array
// of numbers, as Voyage's Python client does (numpy.frombuffer): float →
// little-endian float32, int8 and binary → int8, uint8 and ubinary → uint8.
func decodeBase64Embedding(s, dtype string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("base64: %w", err)
	}
	_, size, stored, _ := dtypeInfo(dtype, 0)
	if len(raw)%size != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of %d-byte values", len(raw), size)
	}
	out := make([]byte, 0, len(raw)/size*stored+2)
	out = append(out, '[')
	for i := 0; i < len(raw); i += size {
		if i > 0 {
			out = append(out, ',')
		}
		switch dtype {
		case "int8", "binary":
			out = strconv.AppendInt(out, int64(int8(raw[i])), 10)
		case "uint8", "ubinary":
			out = strconv.AppendUint(out, uint64(raw[i]), 10)
		default:
			f := math.Float32frombits(binary.LittleEndian.Uint32(raw[i:]))
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, fmt.Errorf("value %d is %v", i/size, f)
			}
			out = appendFloat32(out, f)
		}
	}
	return append(out, ']'), nil
}

// appendFloat32 writes f as encoding/json writes a float32: the shortest
// form that reads back as f, with an exponent only below 1e-6 or from 1e21.
func appendFloat32(b []byte, f float32) []byte {
	abs := math.Abs(float64(f))
	format := byte('f')
	if abs != 0 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, float64(f), format, -1, 32)
	if format == 'e' {
		// 1e-07 → 1e-7, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
