package main

// AlimTalk (알림톡): template-based KakaoTalk business messages to phone
// numbers, sent through a Kakao BizMessage partner many recipients per
// request. The partner-neutral part lives here — config, the message a
// notification becomes, grouping a batch into requests — and each partner
// (sens.go, nhn.go) says how one request is built, signed and read. A
// partner is one implementation of the partner interface and a line in
// partners, which also names the credential keys it takes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/notifyd/notifyd/sdk"
)

// Bounds of an AlimTalk message (Kakao's, the same at every partner).
const (
	maxATContent = 1000 // characters of the message body
	maxATTitle   = 50   // characters of the highlight title
	maxATHeader  = 16   // characters of the header
	maxATButtons = 5
	maxATAnswer  = 4 << 20 // bytes of a partner's answer read (100–1,000 results)
	// atRequestsOnce bounds one batch's requests in flight: a host batch
	// of 1,000 (the most) is 10 SENS requests, all sent at once; the
	// channel's concurrency bounds the batches.
	atRequestsOnce = 10
)

// alimtalkRaw is the channel's `alimtalk:` block as written.
type alimtalkRaw struct {
	Partner       string `json:"partner"`
	APIURL        string `json:"api_url"`
	AccessKey     string `json:"access_key"`
	SecretKey     string `json:"secret_key"`
	ServiceID     string `json:"service_id"`
	ChannelID     string `json:"channel_id"`
	AppKey        string `json:"app_key"`
	SenderKey     string `json:"sender_key"`
	TemplateCode  string `json:"template_code"`
	CountryCode   string `json:"country_code"`
	MaxPerRequest int    `json:"max_per_request"`
	Confirm       string `json:"confirm"`
	ConfirmWait   string `json:"confirm_wait"`
	Failover      *struct {
		Type string `json:"type"`
		From string `json:"from"`
	} `json:"failover"`
}

// atConfig is a validated `alimtalk:` block.
type atConfig struct {
	partner       string
	apiURL        string
	accessKey     string
	secretKey     string
	serviceID     string
	channelID     string // SENS plusFriendId
	appKey        string // NHN Cloud appkey (a path segment)
	senderKey     string // NHN Cloud senderKey (the sender profile)
	templateCode  string // default; a message's template_code overrides
	countryCode   string
	maxPerRequest int
	failoverType  string // "" = no SMS/LMS failover
	failoverFrom  string
	// confirm: wait for Kakao's delivery result (true), or take the
	// partner's acceptance as delivery (false).
	confirm     bool
	confirmWait time.Duration
}

// Defaults of the delivery confirmation.
const (
	confirmWaitDefault = 20 * time.Second
	confirmWaitMax     = 5 * time.Minute
)

// partnerInfo describes a partner's fixed facts.
type partnerInfo struct {
	maxPerRequest int
	defaultURL    string
	// credentials are the keys of the alimtalk block that the partner
	// requires, in the order they are checked; a credential key of another
	// partner is refused.
	credentials []credential
	// country, if set, is the only country_code the partner is spoken to
	// with (its API has no field for another country's numbers).
	country string
	build   func(c *atConfig, client *http.Client, now func() time.Time) partner
}

// credential is a key of the alimtalk block that identifies the account at
// a partner.
type credential struct {
	key, why string
	// segment: the value goes into the URL path as one segment.
	segment bool
}

// partners are the BizMessage partners the plugin speaks.
var partners = map[string]partnerInfo{
	"sens": {maxPerRequest: sensMaxMessages, defaultURL: sensDefaultURL, build: newSENS, credentials: []credential{
		{key: "access_key", why: "the NAVER Cloud access key (x-ncp-iam-access-key)"},
		{key: "secret_key", why: "the secret key that signs each request"},
		{key: "service_id", why: "the SENS Biz Message service id (ncp:kkobizmsg:kr:…)", segment: true},
		{key: "channel_id", why: "the KakaoTalk channel id (plusFriendId, e.g. @mychannel)"},
	}},
	"nhn": {maxPerRequest: nhnMaxRecipients, defaultURL: nhnDefaultURL, build: newNHN, country: "82", credentials: []credential{
		{key: "app_key", why: "the NHN Cloud KakaoTalk Bizmessage appkey (console: URL & Appkey)", segment: true},
		{key: "secret_key", why: "the NHN Cloud secret key sent as X-Secret-Key (console: URL & Appkey)"},
		{key: "sender_key", why: "the sender profile's senderKey (console: Sender Profile Management)"},
	}},
}

// credentialValues are the credential keys of the alimtalk block as written.
func (raw *alimtalkRaw) credentialValues() map[string]string {
	return map[string]string{
		"access_key": raw.AccessKey, "secret_key": raw.SecretKey, "service_id": raw.ServiceID,
		"channel_id": raw.ChannelID, "app_key": raw.AppKey, "sender_key": raw.SenderKey,
	}
}

// partner sends one AlimTalk request: the messages share a template code
// (a number may appear more than once).
type partner interface {
	// send returns one verdict per message, in order.
	send(ctx context.Context, templateCode string, ms []*atMessage) []sdk.Verdict
	// secrets are values to scrub from details.
	secrets() []string
}

func parseAlimtalk(raw *alimtalkRaw) (*atConfig, error) {
	if raw == nil {
		return nil, &ConfigError{Key: "alimtalk", Reason: "required with mode alimtalk: the BizMessage partner and its credentials"}
	}
	info, ok := partners[raw.Partner]
	if !ok {
		names := make([]string, 0, len(partners))
		for n := range partners {
			names = append(names, n)
		}
		slices.Sort(names)
		reason := fmt.Sprintf("%q is not a supported partner; want one of %s", raw.Partner, strings.Join(names, ", "))
		if raw.Partner == "" {
			reason = "required: the BizMessage partner, one of " + strings.Join(names, ", ")
		}
		return nil, &ConfigError{Key: "alimtalk.partner", Reason: reason}
	}
	c := &atConfig{
		partner:      raw.Partner,
		accessKey:    raw.AccessKey,
		secretKey:    raw.SecretKey,
		serviceID:    raw.ServiceID,
		channelID:    raw.ChannelID,
		appKey:       raw.AppKey,
		senderKey:    raw.SenderKey,
		templateCode: raw.TemplateCode,
		countryCode:  raw.CountryCode,
	}
	values := raw.credentialValues()
	wanted := make([]string, len(info.credentials))
	for i, r := range info.credentials {
		wanted[i] = r.key
	}
	set := make([]string, 0, len(values))
	for k, v := range values {
		if v != "" && !slices.Contains(wanted, k) {
			set = append(set, k)
		}
	}
	if len(set) > 0 {
		slices.Sort(set)
		return nil, &ConfigError{Key: "alimtalk." + set[0], Reason: fmt.Sprintf("not used with partner %s (its credentials are %s)", raw.Partner, strings.Join(wanted, ", "))}
	}
	for _, r := range info.credentials {
		val := values[r.key]
		switch {
		case val == "":
			return nil, &ConfigError{Key: "alimtalk." + r.key, Reason: "required with partner " + raw.Partner + ": " + r.why}
		case strings.ContainsAny(val, " \t\r\n"):
			return nil, &ConfigError{Key: "alimtalk." + r.key, Reason: "contains whitespace (a copy-paste accident?)"}
		case r.segment && strings.ContainsAny(val, "/?#%"):
			return nil, &ConfigError{Key: "alimtalk." + r.key, Reason: "must not contain / ? # or %: it is a path segment"}
		}
	}
	var err error
	if c.apiURL, err = baseURL("alimtalk.api_url", raw.APIURL, info.defaultURL); err != nil {
		return nil, err
	}
	if c.countryCode == "" {
		c.countryCode = "82"
	}
	if !allDigits(c.countryCode) || len(c.countryCode) > 3 {
		return nil, &ConfigError{Key: "alimtalk.country_code", Reason: fmt.Sprintf("%q is not a country calling code (1–3 digits, 82 for Korea)", c.countryCode)}
	}
	if info.country != "" && c.countryCode != info.country {
		return nil, &ConfigError{Key: "alimtalk.country_code", Reason: fmt.Sprintf("%q: partner %s is spoken to with national numbers of country %s only (its API has no country code field)", c.countryCode, raw.Partner, info.country)}
	}
	switch {
	case raw.MaxPerRequest == 0:
		c.maxPerRequest = info.maxPerRequest
	case raw.MaxPerRequest < 1 || raw.MaxPerRequest > info.maxPerRequest:
		return nil, &ConfigError{Key: "alimtalk.max_per_request", Reason: fmt.Sprintf("%d is outside 1–%d (%s's maximum per request)", raw.MaxPerRequest, info.maxPerRequest, raw.Partner)}
	default:
		c.maxPerRequest = raw.MaxPerRequest
	}
	switch raw.Confirm {
	case "", "delivered":
		c.confirm = true
	case "accepted":
	default:
		return nil, &ConfigError{Key: "alimtalk.confirm", Reason: fmt.Sprintf(`%q is not "delivered" (wait for Kakao's delivery result) or "accepted" (the partner's acceptance is enough)`, raw.Confirm)}
	}
	var wait time.Duration
	wait, err = sdk.ParseDuration(raw.ConfirmWait, confirmWaitDefault)
	if err != nil || wait > confirmWaitMax {
		return nil, &ConfigError{Key: "alimtalk.confirm_wait", Reason: fmt.Sprintf("%q is not a duration between 1ms and %s", raw.ConfirmWait, confirmWaitMax)}
	}
	c.confirmWait = wait
	if f := raw.Failover; f != nil {
		switch f.Type {
		case "SMS", "LMS":
		default:
			return nil, &ConfigError{Key: "alimtalk.failover.type", Reason: fmt.Sprintf("%q is not SMS or LMS", f.Type)}
		}
		if !allDigits(f.From) || len(f.From) < 7 || len(f.From) > 15 {
			return nil, &ConfigError{Key: "alimtalk.failover.from", Reason: "required with failover: the registered calling number to send SMS/LMS from, digits only"}
		}
		c.failoverType, c.failoverFrom = f.Type, f.From
	}
	return c, nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// atPayload is the AlimTalk message a notification becomes: its payload, or
// the channel's `template` rendered over the payload.
type atPayload struct {
	TemplateCode string     `json:"template_code"`
	Content      string     `json:"content"`
	Title        string     `json:"title"`
	Header       string     `json:"header"`
	Buttons      []atButton `json:"buttons"`
	Failover     *struct {
		Subject string `json:"subject"`
		Content string `json:"content"`
	} `json:"failover"`
}

// atButton is one of the template's buttons (Kakao's button fields).
type atButton struct {
	Type          string `json:"type"`
	Name          string `json:"name"`
	LinkMobile    string `json:"linkMobile,omitempty"`
	LinkPc        string `json:"linkPc,omitempty"`
	SchemeIos     string `json:"schemeIos,omitempty"`
	SchemeAndroid string `json:"schemeAndroid,omitempty"`
}

// atMessage is one validated message of a batch.
type atMessage struct {
	idx     int
	id      int64 // the notification id (sdk.Message.ID): the same on every attempt
	country string
	to      string // national number, digits only
	p       atPayload
}

// parseRecipient turns a phone number into the partner's country code and
// digits-only number. Separators (space, -, ., parentheses) are dropped; a
// leading + means the number includes its country code, which must be the
// channel's (+82 10… becomes 010…).
func parseRecipient(r, country string) (cc, to string, err error) {
	var b strings.Builder
	for i, c := range r {
		switch {
		case c >= '0' && c <= '9':
			b.WriteRune(c)
		case c == '+' && i == 0:
		case c == ' ' || c == '-' || c == '.' || c == '(' || c == ')':
		default:
			return "", "", fmt.Errorf("recipient %q is not a phone number (digits, with optional + and separators)", clean(r))
		}
	}
	digits := b.String()
	if strings.HasPrefix(r, "+") {
		rest, ok := strings.CutPrefix(digits, country)
		if !ok {
			return "", "", fmt.Errorf("recipient %q is not a +%s number, the channel's country_code", clean(r), country)
		}
		if country == "82" && !strings.HasPrefix(rest, "0") {
			rest = "0" + rest
		}
		digits = rest
	}
	if len(digits) < 7 || len(digits) > 15 {
		return "", "", fmt.Errorf("recipient %q has %d digits; a phone number has 7–15", clean(r), len(digits))
	}
	return country, digits, nil
}

// echoedNumber is a number as a partner's answer gives it, in the form
// atMessage.to has: separators dropped and a leading +country turned back
// into the national number (+82 10-1234-5678 is 01012345678), as
// parseRecipient did with the recipient. A partner that formats the number
// it echoes must not make a message it took look unlisted: retried, it
// would be sent again (SENS has no idempotency key).
func echoedNumber(no, country string) string {
	if _, to, err := parseRecipient(no, country); err == nil {
		return to
	}
	return digitsOf(no)
}

// countryOf is the country code of a request's messages (one channel's).
func countryOf(ms []*atMessage) string {
	if len(ms) == 0 {
		return ""
	}
	return ms[0].country
}

// alimtalkSender delivers one AlimTalk channel's messages.
type alimtalkSender struct {
	cfg     *config
	at      *atConfig
	partner partner
	secrets sdk.Redactor
}

func newAlimtalkSender(c *config, now func() time.Time) *alimtalkSender {
	client := &http.Client{
		Transport: newTransport(),
		// A partner does not redirect; following one would carry the
		// signed request somewhere unexpected.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       c.timeout,
	}
	p := partners[c.alimtalk.partner].build(c.alimtalk, client, now)
	s := &alimtalkSender{cfg: c, at: c.alimtalk, partner: p}
	s.secrets.Add(p.secrets()...)
	return s
}

// Send delivers one message: a batch of one.
func (s *alimtalkSender) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	return s.SendBatch(ctx, []sdk.Message{m})[0]
}

// SendBatch renders every message, answers the invalid ones PERMANENT at
// once, groups the rest by template code into requests of at most
// max_per_request messages, and sends those concurrently.
func (s *alimtalkSender) SendBatch(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
	vs := make([]sdk.Verdict, len(ms))
	groups := map[string][][]*atMessage{} // template code → requests
	var order []string
	for i, m := range ms {
		am, err := s.message(i, m)
		if err != nil {
			vs[i] = sdk.Permanent(s.secrets.Redact(err.Error()))
			continue
		}
		code := am.p.TemplateCode
		reqs, seen := groups[code]
		if !seen {
			order = append(order, code)
		}
		if n := len(reqs); n > 0 && len(reqs[n-1]) < s.at.maxPerRequest {
			reqs[n-1] = append(reqs[n-1], am)
		} else {
			reqs = append(reqs, []*atMessage{am})
		}
		groups[code] = reqs
	}
	var wg sync.WaitGroup
	inflight := make(chan struct{}, atRequestsOnce)
	for _, code := range order {
		for _, req := range groups[code] {
			wg.Add(1)
			inflight <- struct{}{}
			go func() {
				defer func() { <-inflight; wg.Done() }()
				for k, v := range s.partner.send(ctx, code, req) {
					v.Detail = s.secrets.Redact(v.Detail)
					vs[req[k].idx] = v
				}
			}()
		}
	}
	wg.Wait()
	return vs
}

// message validates one notification into an AlimTalk message.
func (s *alimtalkSender) message(i int, m sdk.Message) (*atMessage, error) {
	cc, to, err := parseRecipient(m.Recipient, s.at.countryCode)
	if err != nil {
		return nil, err
	}
	raw := m.Payload
	if s.cfg.template != nil {
		data, err := decodePayload(m.Payload)
		if err != nil {
			return nil, err
		}
		if raw, err = s.cfg.template.render(data); err != nil {
			return nil, err
		}
	}
	var p atPayload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		what := "payload"
		if s.cfg.template != nil {
			what = "the rendered template"
		}
		return nil, fmt.Errorf("%s is not an AlimTalk message {template_code, content, title, header, buttons, failover}: %v", what, clean(err.Error()))
	}
	if p.TemplateCode == "" {
		p.TemplateCode = s.at.templateCode
	}
	switch {
	case p.TemplateCode == "":
		return nil, fmt.Errorf("no template_code: the message names none and the channel's alimtalk.template_code is not set")
	case len(p.TemplateCode) > 64 || strings.ContainsAny(p.TemplateCode, " \t\r\n"):
		return nil, fmt.Errorf("template_code %q is not a template code", clean(p.TemplateCode))
	case p.Content == "":
		return nil, fmt.Errorf("no content: AlimTalk sends the template's text with its variables filled in, and the partner checks it against template %s", p.TemplateCode)
	case utf8.RuneCountInString(p.Content) > maxATContent:
		return nil, fmt.Errorf("content has %d characters; AlimTalk allows %d", utf8.RuneCountInString(p.Content), maxATContent)
	case utf8.RuneCountInString(p.Title) > maxATTitle:
		return nil, fmt.Errorf("title has %d characters; AlimTalk allows %d", utf8.RuneCountInString(p.Title), maxATTitle)
	case utf8.RuneCountInString(p.Header) > maxATHeader:
		return nil, fmt.Errorf("header has %d characters; AlimTalk allows %d", utf8.RuneCountInString(p.Header), maxATHeader)
	case len(p.Buttons) > maxATButtons:
		return nil, fmt.Errorf("%d buttons; AlimTalk allows %d", len(p.Buttons), maxATButtons)
	}
	for k, b := range p.Buttons {
		if b.Type == "" || b.Name == "" {
			return nil, fmt.Errorf("buttons[%d] needs a type (WL, AL, DS, BK, MD, …) and a name", k)
		}
	}
	return &atMessage{idx: i, id: m.ID, country: cc, to: to, p: p}, nil
}

// matchAnswers pairs each message with its entry in a partner's per-message
// answer, whose numbers (normalized as atMessage.to; "" when the partner
// left it out) are given in the answer's order: index k of the answer for
// each message, -1 when it has none. Partners answer in the request's
// order, and each entry is checked against the message's number as well;
// when the order does not hold, a message is matched by number only if the
// number is in the request and in the answer once — a reordered or short
// answer never credits one recipient with another's result.
func matchAnswers(numbers []string, ms []*atMessage) []int {
	byNo := make(map[string]int, len(numbers))
	for k, no := range numbers {
		if _, dup := byNo[no]; dup {
			byNo[no] = -1
		} else {
			byNo[no] = k
		}
	}
	inRequest := make(map[string]int, len(ms))
	for _, m := range ms {
		inRequest[m.to]++
	}
	at := make([]int, len(ms))
	for i, m := range ms {
		at[i] = -1
		if i < len(numbers) && (numbers[i] == m.to || (numbers[i] == "" && len(numbers) == len(ms))) {
			at[i] = i // in place: the same number, or no number in a full answer
		} else if j, ok := byNo[m.to]; ok && j >= 0 && inRequest[m.to] == 1 {
			at[i] = j
		}
	}
	return at
}

// postAnswer POSTs body as JSON to url, with the headers set adds, and
// reads the answer (bounded). When there is no answer to read, fail is the
// verdict of every message of the request: a body that cannot be encoded
// or a request that cannot be built is final, a transport error classified,
// and an answer cut short retried (the request reached the partner:
// retrying may send twice, never zero).
func postAnswer(ctx context.Context, client *http.Client, partner, url string, body any, set func(http.Header)) (resp *http.Response, answer []byte, fail *sdk.Verdict) {
	failed := func(v sdk.Verdict) (*http.Response, []byte, *sdk.Verdict) { return nil, nil, &v }
	ctx, cancel := withReconcileReserve(ctx)
	defer cancel()
	raw, err := json.Marshal(body)
	if err != nil {
		return failed(sdk.Permanent(fmt.Sprintf("encode the %s request: %v", partner, err)))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return failed(sdk.Permanent(fmt.Sprintf("build the %s request: %v", partner, err)))
	}
	set(req.Header)
	resp, err = client.Do(req)
	if err != nil {
		return failed(sdk.ClassifyHTTP(nil, fmt.Errorf("send to %s: %w", partner, transportError(err))))
	}
	defer resp.Body.Close()
	if answer, err = readAnswer(ctx, resp); err != nil {
		return failed(sdk.Transient(fmt.Sprintf("read %s's answer: %v", partner, err)).WithStatus(resp.StatusCode))
	}
	return resp, answer, nil
}

// withReconcileReserve is ctx ending a reserve before ctx's deadline (a
// quarter of the time left, at most 3 s; none under 400 ms left): the POST
// runs within it, so that when its answer is lost — a timeout, a reset, a
// 5xx after the partner took the request — the reconcile that follows
// (the partner's message list) still has time to run before the message's
// deadline, when the SDK has answered TRANSIENT for it and a retry would
// send again. Without it the POST used the whole deadline and a timeout was
// never reconciled.
func withReconcileReserve(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	reserve := min(time.Until(dl)/4, reconcileReserve)
	if reserve < 100*time.Millisecond {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, dl.Add(-reserve))
}

// reconcileReserve is the most withReconcileReserve keeps back.
const reconcileReserve = 3 * time.Second

// getAnswer GETs url (within the client's timeout), with the headers set
// adds, and decodes a 2xx answer into out. False for anything else: the
// delivery poll asks again next time.
func getAnswer(ctx context.Context, client *http.Client, url string, set func(http.Header), out any) bool {
	ctx, cancel := context.WithTimeout(ctx, client.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	set(req.Header)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	raw, err := readAnswer(ctx, resp)
	return err == nil && resp.StatusCode/100 == 2 && json.Unmarshal(raw, out) == nil
}

// pollDelivery calls poll, after waits of pollEvery, 2×pollEvery, …, until
// done, or until the next wait would end past confirmWait from now or a
// second before ctx's deadline (the time left to answer the host).
func pollDelivery(ctx context.Context, now func() time.Time, confirmWait, pollEvery time.Duration, done func() bool, poll func()) {
	until := now().Add(confirmWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(until) {
		until = d.Add(-time.Second)
	}
	for wait := pollEvery; !done() && now().Add(wait).Before(until); wait += pollEvery {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		poll()
	}
}

// readAnswer reads at most maxATAnswer bytes of a partner's answer, within
// ctx (readBody).
func readAnswer(ctx context.Context, resp *http.Response) ([]byte, error) {
	raw, err := readBody(ctx, resp, maxATAnswer+1)
	if err == nil && len(raw) > maxATAnswer {
		err = fmt.Errorf("answer is over %d bytes", maxATAnswer)
	}
	return raw, err
}

// readBody reads at most limit bytes of resp's body, and never past ctx:
// the body is closed when ctx ends, whatever the transport does. A request's
// context bounds its body only while net/http holds the connection; a 101
// answer hands the connection itself over as the body, which nothing
// bounded, so a proxy that answered 101 and kept the connection open held
// the send for ever (past its deadline; one goroutine and connection more at
// each retry). An interim or switching answer (1xx) is no answer about the
// message: its body is not read at all.
func readBody(ctx context.Context, resp *http.Response, limit int64) ([]byte, error) {
	if resp.StatusCode < 200 {
		_ = resp.Body.Close()
		resp.Body = http.NoBody
		return nil, nil
	}
	stop := context.AfterFunc(ctx, func() { _ = resp.Body.Close() })
	defer stop()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return raw, err
}

// reconcileUnlisted runs reconcile over the messages at unlisted of a request
// the partner accepted but whose answer left them out, their verdicts so far
// in vs, and writes back what it says. Retried blind, a message the partner
// took goes out twice (SENS has no idempotency key; the host's retry of a
// message alone carries another NHN Cloud key), so they get the list lookup
// a lost answer gets.
func reconcileUnlisted(ms []*atMessage, vs []sdk.Verdict, unlisted []int, reconcile func(ms []*atMessage, failed []sdk.Verdict) []sdk.Verdict) {
	if len(unlisted) == 0 {
		return
	}
	sub := make([]*atMessage, len(unlisted))
	failed := make([]sdk.Verdict, len(unlisted))
	for k, i := range unlisted {
		sub[k], failed[k] = ms[i], vs[i]
	}
	for k, v := range reconcile(sub, failed) {
		vs[unlisted[k]] = v
	}
}

// everyone is one verdict for each message of a request.
func everyone(n int, v sdk.Verdict) []sdk.Verdict {
	vs := make([]sdk.Verdict, n)
	for i := range vs {
		vs[i] = v
	}
	return vs
}
