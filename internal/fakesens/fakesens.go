// Package fakesens is a fake NAVER Cloud SENS AlimTalk partner on loopback,
// for the bench and the daemon-level tests of the Kakao plugin's AlimTalk
// mode: it reproduces the documented send API (POST
// /alimtalk/v2/services/{serviceId}/messages: the API Gateway's signature
// and timestamp checks, at most 100 messages, a 202 with requestStatusCode
// A000 per message) and the result list (GET …/messages?requestId=…) with
// Kakao's delivery codes (plugins/kakao/sens.go cites the documents). The
// plugin's unit tests, the bench and the daily-quiz acceptance test use it.
package fakesens

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The fake's credentials (loopback only, never real ones).
const (
	AccessKey = "fakesens-access-key"
	SecretKey = "fakesens-secret-key"
	ServiceID = "ncp:kkobizmsg:kr:0000000:fake"
	ChannelID = "@fake"
)

// MaxMessages is SENS's documented maximum per request.
const MaxMessages = 100

// Server is the fake partner. Set its maps before the first request.
type Server struct {
	// Templates are the approved templates by code; a message's content
	// must match its template with #{variables} as wildcards (else 3016).
	Templates map[string]string
	// Undeliverable numbers get this Kakao delivery code (3019, 3020, …).
	Undeliverable map[string]string
	// Flaky numbers fail their first delivery with 9999, then succeed.
	Flaky map[string]bool
	// OnAccept, if set, is called for each message SENS accepts.
	OnAccept func(to string, at time.Time)
	// ProcessingPolls is how many result polls see a message still
	// processing before its result shows; Never keeps them processing.
	ProcessingPolls int
	Never           bool
	// Script answers the next send requests as given, in order, after the
	// signature check.
	Script []Answer
	// AcceptThenFail: the next sends are accepted (sent, listed) and then
	// answered HTTP 500, as when the gateway fails after SENS took them.
	AcceptThenFail int
	// Failover numbers, when Kakao does not deliver their AlimTalk and the
	// message asked for useSmsFailover, get this failover outcome in the
	// result list: "success", "fail", or "" (not reported yet).
	Failover map[string]string
	// Refused numbers are not accepted: their message is answered, and
	// listed, with this requestStatusCode (SENS documents A000 alone, the
	// rest as failures) and is never sent.
	Refused map[string]string

	srv *http.Server
	ln  net.Listener

	mu        sync.Mutex
	patterns  map[string]*regexp.Regexp
	seq       int
	requests  map[string][]item // requestId → its messages
	polled    map[string]int    // requestId → result polls
	polls     int
	sends     []Request
	delivered map[string]int // number → deliveries with code 0000
	attempts  map[string]int
}

// Answer is a scripted answer.
type Answer struct {
	Status int
	Header http.Header
	Body   string
}

// Request is a send request as the fake decoded it.
type Request struct {
	PlusFriendID string    `json:"plusFriendId"`
	TemplateCode string    `json:"templateCode"`
	Messages     []Message `json:"messages"`
}

// Message is one message of a send request: SENS's documented fields only
// (an undocumented one is refused with 400).
type Message struct {
	CountryCode    string            `json:"countryCode"`
	To             string            `json:"to"`
	Title          string            `json:"title"`
	Content        string            `json:"content"`
	HeaderContent  string            `json:"headerContent"`
	Buttons        []map[string]any  `json:"buttons"`
	UseSmsFailover *bool             `json:"useSmsFailover"`
	FailoverConfig map[string]string `json:"failoverConfig"`
}

type item struct {
	RequestID         string `json:"requestId"`
	RequestTime       string `json:"requestTime"`
	TemplateCode      string `json:"templateCode"`
	PlusFriendID      string `json:"plusFriendId"`
	Content           string `json:"content"`
	MessageID         string `json:"messageId"`
	To                string `json:"to"`
	RequestStatusCode string `json:"requestStatusCode"`
	MessageStatusCode string `json:"messageStatusCode"`
	MessageStatusName string `json:"messageStatusName"`
	MessageStatusDesc string `json:"messageStatusDesc"`
	UseSmsFailover    bool   `json:"useSmsFailover"`
	FailoverStatus    string `json:"failoverStatusName,omitempty"`
	requested         time.Time
}

// kst is the time zone of the result list's requestStartTime/EndTime.
var kst = time.FixedZone("KST", 9*60*60)

// Start listens on a free loopback port.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakesens: listen on loopback: %w", err)
	}
	s := &Server{
		Templates: map[string]string{}, Undeliverable: map[string]string{}, Flaky: map[string]bool{}, Failover: map[string]string{}, Refused: map[string]string{},
		ln: ln, requests: map[string][]item{}, polled: map[string]int{}, delivered: map[string]int{}, attempts: map[string]int{},
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the api_url to configure.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Alimtalk is an `alimtalk:` config block pointing at the fake.
func (s *Server) Alimtalk(templateCode, confirm string) map[string]any {
	return map[string]any{
		"partner": "sens", "api_url": s.URL(), "access_key": AccessKey, "secret_key": SecretKey,
		"service_id": ServiceID, "channel_id": ChannelID, "template_code": templateCode, "confirm": confirm,
	}
}

// Sizes are the message counts of the send requests, in arrival order.
func (s *Server) Sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := make([]int, len(s.sends))
	for i, r := range s.sends {
		n[i] = len(r.Messages)
	}
	return n
}

// Requests are the send requests the fake decoded, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.sends...)
}

// Polls is how many result-list requests came.
func (s *Server) Polls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// Delivered is how many times each number was delivered (code 0000).
func (s *Server) Delivered() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.delivered)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func gatewayError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"errorCode": code, "message": msg}})
}

func sensError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"status": status, "errors": http.StatusText(status), "errorMessage": msg})
}

// signature is x-ncp-apigw-signature-v2 over "METHOD URI\nTIMESTAMP\nKEY".
func signature(method, uri, ts string) string {
	mac := hmac.New(sha256.New, []byte(SecretKey))
	mac.Write([]byte(method + " " + uri + "\n" + ts + "\n" + AccessKey))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// ServeHTTP answers as SENS and its API Gateway do.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ts := r.Header.Get("x-ncp-apigw-timestamp")
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.UnixMilli(ms)).Abs() > 5*time.Minute ||
		r.Header.Get("x-ncp-iam-access-key") != AccessKey ||
		r.Header.Get("x-ncp-apigw-signature-v2") != signature(r.Method, r.RequestURI, ts) {
		gatewayError(w, http.StatusUnauthorized, "200", "Authentication Failed")
		return
	}
	if r.URL.Path != "/alimtalk/v2/services/"+ServiceID+"/messages" {
		gatewayError(w, http.StatusNotFound, "300", "Not Found Exception")
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.send(w, r)
	case http.MethodGet:
		s.list(w, r)
	default:
		gatewayError(w, http.StatusNotFound, "300", "Not Found Exception")
	}
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		sensError(w, http.StatusBadRequest, "Content-Type must be application/json")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var body Request
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(&body)
	}
	if err != nil {
		sensError(w, http.StatusBadRequest, "the body is not a send request: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends = append(s.sends, body)
	if len(s.Script) > 0 {
		a := s.Script[0]
		s.Script = s.Script[1:]
		for k, v := range a.Header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.Status)
		_, _ = io.WriteString(w, a.Body)
		return
	}
	pattern, ok := s.template(body.TemplateCode)
	switch {
	case body.PlusFriendID != ChannelID:
		sensError(w, http.StatusBadRequest, "plusFriendId is not a channel of this project")
		return
	case !ok:
		sensError(w, http.StatusBadRequest, "templateCode not found")
		return
	case len(body.Messages) == 0 || len(body.Messages) > MaxMessages:
		sensError(w, http.StatusBadRequest, fmt.Sprintf("messages must have 1 to %d entries", MaxMessages))
		return
	}
	s.seq++
	id := fmt.Sprintf("RAPI-%08d", s.seq)
	now := time.Now()
	answers := make([]map[string]any, len(body.Messages))
	for k, m := range body.Messages {
		if m.To == "" || strings.Trim(m.To, "0123456789") != "" {
			sensError(w, http.StatusBadRequest, fmt.Sprintf("messages[%d].to must be digits only", k))
			return
		}
		s.attempts[m.To]++
		it := item{RequestID: id, RequestTime: now.In(kst).Format("2006-01-02 15:04:05"), TemplateCode: body.TemplateCode, PlusFriendID: body.PlusFriendID,
			Content: m.Content, MessageID: fmt.Sprintf("%s-%03d", id, k), To: m.To, RequestStatusCode: "A000",
			MessageStatusCode: "0000", MessageStatusName: "success", MessageStatusDesc: "수신 완료", requested: now,
			UseSmsFailover: m.UseSmsFailover != nil && *m.UseSmsFailover}
		answer := map[string]any{"messageId": it.MessageID, "countryCode": m.CountryCode, "to": m.To, "content": m.Content,
			"requestStatusCode": "A000", "requestStatusName": "success", "requestStatusDesc": "성공", "useSmsFailover": m.UseSmsFailover != nil && *m.UseSmsFailover}
		if code := s.Refused[m.To]; code != "" {
			// Not accepted: listed with its code, never sent.
			it.RequestStatusCode, it.MessageStatusCode, it.MessageStatusName, it.MessageStatusDesc = code, "", "", ""
			answer["requestStatusCode"], answer["requestStatusName"], answer["requestStatusDesc"] = code, "fail", "발송 요청 실패"
			s.requests[id] = append(s.requests[id], it)
			answers[k] = answer
			continue
		}
		switch {
		case !pattern.MatchString(m.Content):
			it.MessageStatusCode = "3016"
		case s.Undeliverable[m.To] != "":
			it.MessageStatusCode = s.Undeliverable[m.To]
		case s.Flaky[m.To] && s.attempts[m.To] == 1:
			it.MessageStatusCode = "9999"
		}
		if it.MessageStatusCode == "0000" {
			s.delivered[m.To]++
		} else {
			it.MessageStatusName, it.MessageStatusDesc = "fail", "발송 실패"
			if it.UseSmsFailover {
				it.FailoverStatus = s.Failover[m.To]
			}
		}
		s.requests[id] = append(s.requests[id], it)
		answers[k] = answer
		if s.OnAccept != nil {
			s.OnAccept(m.To, now)
		}
	}
	if s.AcceptThenFail > 0 {
		s.AcceptThenFail--
		gatewayError(w, http.StatusInternalServerError, "900", "Unexpected Error")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{
		"requestId": id, "requestTime": now.Format("2006-01-02T15:04:05.000"),
		"statusCode": "202", "statusName": "success", "messages": answers,
	})
}

// template compiles an approved template into its content pattern; no
// templates configured means any content is approved.
func (s *Server) template(code string) (*regexp.Regexp, bool) {
	if len(s.Templates) == 0 {
		return regexp.MustCompile(`(?s).+`), code != ""
	}
	t, ok := s.Templates[code]
	if !ok {
		return nil, false
	}
	if s.patterns == nil {
		s.patterns = map[string]*regexp.Regexp{}
	}
	if p := s.patterns[code]; p != nil {
		return p, true
	}
	parts := regexp.MustCompile(`#\{[^}]+\}`).Split(t, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	p := regexp.MustCompile(`(?s)^` + strings.Join(parts, `.+`) + `$`)
	s.patterns[code] = p
	return p, true
}

// list is the result list of one request: each message processing for
// ProcessingPolls polls (forever with Never), then decided.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("requestId")
	if id == "" {
		s.listByTime(w, q)
		return
	}
	s.mu.Lock()
	s.polls++
	items, ok := s.requests[id]
	s.polled[id]++
	decided := !s.Never && s.polled[id] > s.ProcessingPolls
	s.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound) // SENS: an empty 404 when nothing matches
		return
	}
	if !decided {
		pending := make([]item, len(items))
		for i, it := range items {
			pending[i] = item{MessageID: it.MessageID, To: it.To, RequestStatusCode: it.RequestStatusCode, MessageStatusName: "processing"}
		}
		items = pending
	}
	writeJSON(w, http.StatusOK, map[string]any{"statusCode": "200", "statusName": "success", "messages": items, "pageSize": MaxMessages, "itemCount": len(items)})
}

// listByTime is the result list by request time: plusFriendId and
// requestStartTime+requestEndTime ("YYYY-MM-DD HH:mm:ss") required,
// templateCode and to narrowing it. Its entries show their result as they
// would by requestId (this fake decides them at once).
func (s *Server) listByTime(w http.ResponseWriter, q url.Values) {
	start, err1 := time.ParseInLocation("2006-01-02 15:04:05", q.Get("requestStartTime"), kst)
	end, err2 := time.ParseInLocation("2006-01-02 15:04:05", q.Get("requestEndTime"), kst)
	if q.Get("plusFriendId") == "" || err1 != nil || err2 != nil || end.Sub(start) > 31*24*time.Hour {
		sensError(w, http.StatusBadRequest, "requestId, or plusFriendId with requestStartTime and requestEndTime, is required")
		return
	}
	s.mu.Lock()
	s.polls++
	var items []item
	for _, its := range s.requests {
		for _, it := range its {
			if it.PlusFriendID != q.Get("plusFriendId") || it.requested.Before(start) || it.requested.After(end.Add(time.Second)) ||
				(q.Get("templateCode") != "" && it.TemplateCode != q.Get("templateCode")) || (q.Get("to") != "" && it.To != q.Get("to")) {
				continue
			}
			items = append(items, it)
		}
	}
	s.mu.Unlock()
	sort.Slice(items, func(i, j int) bool { return items[i].MessageID < items[j].MessageID })
	writeJSON(w, http.StatusOK, map[string]any{"statusCode": "200", "statusName": "success", "messages": items, "pageSize": MaxMessages, "itemCount": len(items)})
}
