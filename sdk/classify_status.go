package sdk

import (
	"bytes"
	"io"
	"net/http"
)

// ClassifyBodyPrefix is how many bytes of a failed response's body
// ClassifyHTTP and ClassifyStatus quote in the verdict's Detail. A caller of
// ClassifyStatus needs to read no more than this.
const ClassifyBodyPrefix = bodyPrefix

// ClassifyStatus is ClassifyHTTP for an answer that did not come through
// net/http (a provider using another HTTP client): the answer is given as its
// status code, its Retry-After header value ("" when absent) and the start of
// its body (bytes past ClassifyBodyPrefix are not used; pass nil when the
// body does not matter, as for a 2xx). The rules are ClassifyHTTP's own —
// this runs them on a minimal *http.Response — so the two cannot drift apart.
//
// A 2xx with an empty retryAfter and a nil body costs no allocation, so a
// caller can classify first and read the start of the body only when the
// verdict is not a success:
//
//	v := sdk.ClassifyStatus(code, "", nil)
//	if v.Outcome != sdk.OutcomeSuccess {
//		v = sdk.ClassifyStatus(code, retryAfter, bodyStart)
//	}
func ClassifyStatus(code int, retryAfter string, body []byte) Verdict {
	return classifyStatus(code, retryAfter, body, nil)
}

// ClassifyKeyedStatus is ClassifyStatus for an answer to a request that
// carried an Idempotency-Key: ClassifyHTTP's rules for such a request, so a
// 409 (the receiver still working on an earlier attempt with the key) is
// TRANSIENT, not final.
func ClassifyKeyedStatus(code int, retryAfter string, body []byte) Verdict {
	return classifyStatus(code, retryAfter, body, keyedRequest)
}

// keyedRequest stands for a request that carried an Idempotency-Key.
var keyedRequest = &http.Request{Header: http.Header{"Idempotency-Key": {"-"}}}

func classifyStatus(code int, retryAfter string, body []byte, req *http.Request) Verdict {
	resp := http.Response{StatusCode: code, Request: req}
	if retryAfter != "" {
		resp.Header = http.Header{"Retry-After": []string{retryAfter}}
	}
	if len(body) > 0 {
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return ClassifyHTTP(&resp, nil)
}
