package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// fakeKakao reproduces the documented behaviour of kapi.kakao.com's default
// template send APIs and kauth.kakao.com's token refresh, on two loopback
// servers. Tests script error answers and inspect every request.
type fakeKakao struct {
	api  *httptest.Server
	auth *httptest.Server

	clientID     string
	clientSecret string // "" means the app does not require one

	mu       sync.Mutex
	access   map[string]bool   // valid access tokens
	refresh  map[string]bool   // valid refresh tokens
	rotate   bool              // the next refresh also issues a new refresh token
	issued   int               // tokens issued, to make new values
	script   []cannedAnswer    // answers for the next sends, in order
	refreshC []cannedAnswer    // answers for the next refreshes, in order
	sends    []recordedRequest // every send request
	tokens   []recordedRequest // every token request
	rejected int               // sends answered -401
	// refreshGate, when set, holds each refresh until it is closed.
	refreshGate chan struct{}
	// onReject is called after each -401 answer with the running count.
	onReject func(n int)
	// refuse lists friends a send fails for, with the failure_info code
	// Kakao answers for them (-530: the user refused messages).
	refuse map[string]int
	// refuseRequest lists friends for whom Kakao refuses the whole request
	// they are in with this code (-2: "Not allowed to send a message to
	// some of receivers"), sending it to no one.
	refuseRequest map[string]int
}

type cannedAnswer struct {
	status int
	header http.Header
	body   string
}

type recordedRequest struct {
	Method string
	Path   string
	Header http.Header
	Form   url.Values
	Body   string
}

func newFakeKakao(t testing.TB) *fakeKakao {
	t.Helper()
	f := &fakeKakao{
		clientID: "rest-api-key-123",
		access:   map[string]bool{},
		refresh:  map[string]bool{},
	}
	f.api = httptest.NewServer(http.HandlerFunc(f.serveAPI))
	f.auth = httptest.NewServer(http.HandlerFunc(f.serveAuth))
	t.Cleanup(f.api.Close)
	t.Cleanup(f.auth.Close)
	return f
}

// set changes the fake's state under its lock (its handlers run on other
// goroutines).
func (f *fakeKakao) set(change func(f *fakeKakao)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// answer queues canned answers for the next sends.
func (f *fakeKakao) answer(status int, body string) {
	f.answerWith(cannedAnswer{status: status, body: body})
}

func (f *fakeKakao) answerWith(a cannedAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, a)
}

func (f *fakeKakao) validAccess(tokens ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range tokens {
		f.access[t] = true
	}
}

func (f *fakeKakao) validRefresh(tokens ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range tokens {
		f.refresh[t] = true
	}
}

func (f *fakeKakao) expireAccess(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.access, token)
}

func (f *fakeKakao) sendRequests() []recordedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedRequest(nil), f.sends...)
}

func (f *fakeKakao) tokenRequests() []recordedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedRequest(nil), f.tokens...)
}

func record(r *http.Request) recordedRequest {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	return recordedRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Form: form, Body: string(body)}
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (f *fakeKakao) serveAPI(w http.ResponseWriter, r *http.Request) {
	rec := record(r)
	f.mu.Lock()
	f.sends = append(f.sends, rec)
	f.mu.Unlock()

	if r.Method != http.MethodPost || (r.URL.Path != pathMemo && r.URL.Path != pathFriends) {
		writeJSON(w, http.StatusNotFound, `{"msg":"no such API","code":-1}`)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	valid := ok && f.access[token]
	var onReject func(int)
	var n int
	if !valid {
		f.rejected++
		n, onReject = f.rejected, f.onReject
	}
	f.mu.Unlock()
	if !valid {
		writeJSON(w, http.StatusUnauthorized, `{"msg":"this access token does not exist","code":-401}`)
		if onReject != nil {
			onReject(n)
		}
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		writeJSON(w, http.StatusBadRequest, `{"msg":"invalid header","code":-8}`)
		return
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(rec.Form.Get("template_object")), &obj); err != nil || obj["object_type"] == nil {
		writeJSON(w, http.StatusBadRequest, `{"msg":"template_object is invalid","code":-2}`)
		return
	}
	var uuids []string
	if r.URL.Path == pathFriends {
		if err := json.Unmarshal([]byte(rec.Form.Get("receiver_uuids")), &uuids); err != nil || len(uuids) == 0 || len(uuids) > 5 {
			writeJSON(w, http.StatusBadRequest, `{"msg":"Constraints on the parameter [receiver_uuids] are unsatisfied.","code":-2}`)
			return
		}
	}

	f.mu.Lock()
	for _, u := range uuids {
		if code, ok := f.refuseRequest[u]; ok {
			f.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, fmt.Sprintf(`{"msg":"Constraints on the parameter [receiver_uuids] are unsatisfied. Not allowed to send a message to some of receivers.","code":%d}`, code))
			return
		}
	}
	var canned *cannedAnswer
	if len(f.script) > 0 {
		canned = &f.script[0]
		f.script = f.script[1:]
	}
	f.mu.Unlock()
	if canned != nil {
		for k, vs := range canned.header {
			w.Header()[k] = vs
		}
		writeJSON(w, canned.status, canned.body)
		return
	}
	if r.URL.Path == pathMemo {
		writeJSON(w, http.StatusOK, `{"result_code":0}`)
		return
	}
	f.mu.Lock()
	reached := []string{}
	failed := map[int][]string{}
	for _, u := range uuids {
		if code, refused := f.refuse[u]; refused {
			failed[code] = append(failed[code], u)
		} else {
			reached = append(reached, u)
		}
	}
	f.mu.Unlock()
	answer := map[string]any{"successful_receiver_uuids": reached}
	if len(failed) > 0 {
		var infos []map[string]any
		for code, us := range failed {
			infos = append(infos, map[string]any{"code": code, "msg": "failed for these receivers", "receiver_uuids": us})
		}
		answer["failure_info"] = infos
	}
	b, _ := json.Marshal(answer)
	writeJSON(w, http.StatusOK, string(b))
}

func (f *fakeKakao) serveAuth(w http.ResponseWriter, r *http.Request) {
	rec := record(r)
	f.mu.Lock()
	f.tokens = append(f.tokens, rec)
	gate, clientID, clientSecret := f.refreshGate, f.clientID, f.clientSecret
	var canned *cannedAnswer
	if len(f.refreshC) > 0 {
		canned = &f.refreshC[0]
		f.refreshC = f.refreshC[1:]
	}
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if canned != nil {
		writeJSON(w, canned.status, canned.body)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" {
		writeJSON(w, http.StatusNotFound, `{"error":"not_found","error_description":"no such endpoint","error_code":"KOE000"}`)
		return
	}
	form := rec.Form
	switch {
	case form.Get("grant_type") != "refresh_token":
		writeJSON(w, http.StatusBadRequest, `{"error":"unsupported_grant_type","error_description":"bad grant_type","error_code":"KOE002"}`)
		return
	case form.Get("client_id") != clientID:
		writeJSON(w, http.StatusUnauthorized, `{"error":"invalid_client","error_description":"Not exist client_id","error_code":"KOE101"}`)
		return
	case clientSecret != "" && form.Get("client_secret") != clientSecret:
		writeJSON(w, http.StatusUnauthorized, `{"error":"invalid_client","error_description":"Bad client credentials","error_code":"KOE010"}`)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := form.Get("refresh_token")
	if !f.refresh[old] {
		writeJSON(w, http.StatusBadRequest, `{"error":"invalid_grant","error_description":"expired_or_invalid_refresh_token","error_code":"KOE322"}`)
		return
	}
	f.issued++
	access := fmt.Sprintf("ACCESS-issued-%d", f.issued)
	f.access[access] = true
	resp := map[string]any{"access_token": access, "token_type": "bearer", "expires_in": 43199}
	if f.rotate {
		f.rotate = false
		next := fmt.Sprintf("REFRESH-issued-%d", f.issued)
		delete(f.refresh, old) // Kakao expires the old refresh token at once
		f.refresh[next] = true
		resp["refresh_token"] = next
		resp["refresh_token_expires_in"] = 5183999
	}
	b, _ := json.Marshal(resp)
	writeJSON(w, http.StatusOK, string(b))
}
