package main

import (
	"encoding/json"

	"github.com/notifyd/notifyd/sdk/wire"
)

// Fixed bytes of the JSON around the embeddings, with room to spare: one
// data entry ({"object":"embedding","embedding":[…],"index":999}, about 50)
// and the result's envelope without the model's name
// ({"object":"list","data":[…],"model":"","usage":{"total_tokens":…}},
// about 80).
const (
	entryOverhead    = 64
	envelopeOverhead = 128
)

// sizing estimates, before anything is paid for, the bytes of the stored
// result and of Voyage's answer for n inputs of one request shape. Both are
// upper bounds (see storedFloatBytes): a result estimated to fit does fit.
type sizing struct {
	fixed                   int64 // the envelope, model name included
	perStored, perWire      int64 // one data entry
	dims, values            int
	dtype                   string
	storeLimit, answerLimit int64
}

// newSizing sizes r's embeddings for a channel whose results may hold
// maxResultBytes (also the cap on one Voyage answer) and that asks Voyage
// for encodingFormat.
func newSizing(p params, encodingFormat string, maxResultBytes int64) sizing {
	dims := p.dimension()
	values, raw, stored, wireBytes := dtypeInfo(p.OutputDtype, dims)
	perWire := int64(values * wireBytes)
	if encodingFormat == EncodingBase64 {
		perWire = int64((values*raw + 2) / 3 * 4)
	}
	model, _ := json.Marshal(p.Model)
	return sizing{
		fixed:     envelopeOverhead + int64(len(model)),
		perStored: entryOverhead + int64(values*stored),
		perWire:   entryOverhead + perWire,
		dims:      dims, values: values, dtype: dtypeName(p.OutputDtype),
		// The host stores a result only up to wire.MaxResultBytes: past
		// that the embeddings would be paid for and dropped.
		storeLimit:  min(maxResultBytes, wire.MaxResultBytes),
		answerLimit: maxResultBytes,
	}
}

func dtypeName(dtype string) string {
	if dtype == "" {
		return "float"
	}
	return dtype
}

// stored is the estimated bytes of the stored result for n inputs.
func (z sizing) stored(n int) int64 { return z.fixed + int64(n)*z.perStored }

// fitStored is the most inputs whose stored result fits storeLimit;
// fitAnswer the most whose Voyage answer fits max_result_bytes.
func (z sizing) fitStored() int { return fitCount(z.fixed, z.perStored, z.storeLimit) }
func (z sizing) fitAnswer() int { return fitCount(z.fixed, z.perWire, z.answerLimit) }

func fitCount(fixed, per, limit int64) int {
	if limit < fixed+per {
		return 0
	}
	return int(min((limit-fixed)/per, MaxInputs))
}

// plan is how one notification is sent: requests of at most chunk inputs,
// their results merged into one stored result, or, with parts, each POSTed
// to the callback as it comes and a summary stored.
type plan struct {
	chunk int
	parts bool
}

// planRequests sizes r before anything is sent. Without a callback, a
// result that cannot be stored is refused here, permanently, so Voyage is
// never paid for embeddings that would be dropped.
func planRequests(r *request, z sizing, callback bool) (plan, error) {
	n := len(r.texts)
	fitStored, fitAnswer := z.fitStored(), z.fitAnswer()
	if fitStored == 0 || fitAnswer == 0 {
		return plan{}, payloadErr("one embedding of %d dimensions (%s) is estimated at %d bytes, over max_result_bytes (%d, and at most %d stored): raise max_result_bytes or lower output_dimension",
			z.dims, z.dtype, z.fixed+max(z.perStored, z.perWire), z.answerLimit, z.storeLimit)
	}
	switch {
	case z.stored(n) <= z.storeLimit:
		return plan{chunk: min(n, fitAnswer)}, nil
	case callback:
		return plan{chunk: min(fitStored, fitAnswer), parts: true}, nil
	}
	return plan{}, payloadErr("the result of %d inputs at %d dimensions (%s) is estimated at %d bytes, over the %d bytes a result may hold "+
		"(max_result_bytes, at most the host's %d): at most %d inputs per notification fit; send fewer, "+
		"lower output_dimension, use output_dtype int8 or binary, or set callback_url to receive the embeddings in parts",
		n, z.dims, z.dtype, z.stored(n), z.storeLimit, wire.MaxResultBytes, fitStored)
}
