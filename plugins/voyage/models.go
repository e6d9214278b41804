package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// modelSpec is what Voyage documents of one text-embedding model
// (https://docs.voyageai.com/docs/embeddings, /docs/rate-limits, and the
// embeddings API reference); README.md, "Voyage API behaviour", cites each.
type modelSpec struct {
	// tokenLimit is the cap on the total tokens of one request's inputs.
	tokenLimit int
	// dims are the output_dimension values the model takes; nil means a
	// fixed dimension (defaultDim), and then output_dimension may not be set.
	dims       []int
	defaultDim int
	// quantized models take every output_dtype; the others float only.
	quantized bool
	// rpm and tpm are Voyage's tier-1 rate limits for the model's family.
	rpm, tpm int
}

// Tier-1 rate limits by family: the RPM is the same for every model, the
// TPM is 3M, 8M or 16M.
const (
	tier1RPM      = 2000
	tier1TPMLarge = 3_000_000
	tier1TPMMid   = 8_000_000
	tier1TPMLite  = 16_000_000
)

// flexibleDims are the Matryoshka dimensions of the 3-large/3.5/4 and
// code-3 models.
var flexibleDims = []int{256, 512, 1024, 2048}

// models is the per-model table. voyage-3 and voyage-3-lite are no longer
// on Voyage's rate-limit page: they get the smallest family's limits, the
// cautious choice (a lower pace costs throughput, never a 429 storm).
var models = map[string]modelSpec{
	"voyage-4-large":  {tokenLimit: 120_000, dims: flexibleDims, defaultDim: 1024, quantized: true, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-4":        {tokenLimit: 320_000, dims: flexibleDims, defaultDim: 1024, quantized: true, rpm: tier1RPM, tpm: tier1TPMMid},
	"voyage-4-lite":   {tokenLimit: 1_000_000, dims: flexibleDims, defaultDim: 1024, quantized: true, rpm: tier1RPM, tpm: tier1TPMLite},
	"voyage-3-large":  {tokenLimit: 120_000, dims: flexibleDims, defaultDim: 1024, quantized: true, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-3.5":      {tokenLimit: 320_000, dims: flexibleDims, defaultDim: 1024, quantized: true, rpm: tier1RPM, tpm: tier1TPMMid},
	"voyage-3.5-lite": {tokenLimit: 1_000_000, dims: flexibleDims, defaultDim: 1024, quantized: true, rpm: tier1RPM, tpm: tier1TPMLite},
	"voyage-code-3":   {tokenLimit: 120_000, dims: flexibleDims, defaultDim: 1024, quantized: true, rpm: tier1RPM, tpm: tier1TPMLarge},

	"voyage-3":                {tokenLimit: 320_000, defaultDim: 1024, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-3-lite":           {tokenLimit: 1_000_000, defaultDim: 512, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-finance-2":        {tokenLimit: 120_000, defaultDim: 1024, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-law-2":            {tokenLimit: 120_000, defaultDim: 1024, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-multilingual-2":   {tokenLimit: 120_000, defaultDim: 1024, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-code-2":           {tokenLimit: 120_000, defaultDim: 1536, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-2":                {tokenLimit: 320_000, defaultDim: 1024, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-large-2":          {tokenLimit: 120_000, defaultDim: 1536, rpm: tier1RPM, tpm: tier1TPMLarge},
	"voyage-large-2-instruct": {tokenLimit: 120_000, defaultDim: 1024, rpm: tier1RPM, tpm: tier1TPMLarge},
}

// An unknown model is allowed (Voyage ships new ones) with the most
// cautious figures: the smallest token cap and rate limits, and the largest
// dimension Voyage documents for the result-size estimate.
const (
	defaultTokenLimit = 120_000
	unknownModelDim   = 2048
)

// tokenLimit is the documented per-request token cap of model.
func tokenLimit(model string) int {
	if m, ok := models[model]; ok {
		return m.tokenLimit
	}
	return defaultTokenLimit
}

// rateLimits are model's tier-1 requests and tokens per minute.
func rateLimits(model string) (rpm, tpm int) {
	if m, ok := models[model]; ok {
		return m.rpm, m.tpm
	}
	return tier1RPM, tier1TPMLarge
}

// dimension is the number of dimensions p's embeddings have: the one asked
// for, else the model's default (unknownModelDim for a model not in the
// table).
func (p params) dimension() int {
	if p.OutputDimension != 0 {
		return p.OutputDimension
	}
	if m, ok := models[p.Model]; ok {
		return m.defaultDim
	}
	return unknownModelDim
}

// checkModel reports the first of output_dimension and output_dtype that
// p.Model does not take, with the values it does. A model not in the table
// is not checked here: Voyage answers for it.
func (p params) checkModel() (key, reason string) {
	m, ok := models[p.Model]
	if !ok {
		return "", ""
	}
	switch {
	case p.OutputDimension != 0 && m.dims == nil:
		return "output_dimension", fmt.Sprintf("is %d; %s has a fixed dimension (%d): leave output_dimension out",
			p.OutputDimension, p.Model, m.defaultDim)
	case p.OutputDimension != 0 && !slices.Contains(m.dims, p.OutputDimension):
		return "output_dimension", fmt.Sprintf("is %d; %s takes %s", p.OutputDimension, p.Model, orList(m.dims))
	case p.OutputDtype != "" && p.OutputDtype != "float" && !m.quantized:
		return "output_dtype", fmt.Sprintf("is %q; %s takes float only", p.OutputDtype, p.Model)
	}
	return "", ""
}

// orList prints 256, 512, 1024 or 2048.
func orList(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
