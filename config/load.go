package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/notifyd/notifyd/sdk"
)

// EnvPrefix starts every environment variable that overrides a config key.
const EnvPrefix = "NOTIFYD_"

// Load reads the YAML file at path (may be empty: defaults and environment
// only), applies NOTIFYD_ environment overrides from environ (os.Environ when
// nil), expands ${VAR} references in string values, fills defaults and
// validates. Every error names the key at fault.
func Load(path string, environ []string) (*Config, error) {
	if environ == nil {
		environ = os.Environ()
	}
	k := koanf.New(".")
	if path != "" {
		b, err := readFile(path)
		if err != nil {
			return nil, err
		}
		if err := k.Load(rawbytes.Provider(b), boundedYAML{yaml.Parser()}); err != nil {
			return nil, fmt.Errorf("read config %s: %w", path, err)
		}
	}
	known := newEnvIndex(k.Keys())
	if err := k.Load(env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, v string) (string, any) {
			key := known.envKey(name)
			if key == "" {
				return "", nil // no key: ignored (Get("") copies the whole config)
			}
			return key, typedLike(k.Get(key), v)
		},
	}), nil); err != nil {
		return nil, fmt.Errorf("read environment: %w", err)
	}
	for _, key := range k.Keys() {
		if err := checkKnown(key, k.Get(key)); err != nil {
			return nil, err
		}
	}
	if err := expandEnv(k, environ); err != nil {
		return nil, err
	}
	if err := checkValues(k); err != nil {
		return nil, err
	}

	cfg := Default()
	dc := &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		),
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		Result:           &cfg,
		TagName:          "koanf",
	}
	if err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{DecoderConfig: dc}); err != nil {
		return nil, decodeError(err)
	}
	for name, ch := range cfg.Channels {
		cfg.Channels[name] = fillChannel(ch)
	}
	for name, s := range cfg.Schedules {
		cfg.Schedules[name] = fillSchedule(s, cfg.Jobs)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// MaxFileBytes bounds the config file: past it the file is not read further
// and Load fails naming it. A config of every channel and schedule an
// installation has is kilobytes; a path naming /dev/zero, a FIFO fed
// without end, or a log file by mistake must not be read into memory whole
// (and parsed: the YAML tree holds about 5× the text).
const MaxFileBytes = 16 << 20

// readFile reads the config file within MaxFileBytes. A FIFO or /dev/stdin
// (--config <(…)) is read as it comes, a device as well (/dev/null: no keys).
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("read config %s: over %d bytes (config.MaxFileBytes), not read further: is it the config file?", path, MaxFileBytes)
	}
	return b, nil
}

// MaxKeyBytes bounds the config's keys as koanf spells them: every key in
// full (channels.x.config.url) and, for each, every parent of it
// (channels, channels.x, channels.x.config), as koanf builds them for every
// key under them. A config of every channel and schedule an installation has
// spells out tens of kilobytes; 64 levels of 1,000-byte keys over 1,000 keys
// at the bottom (an 82 KB file) spelt out 4.5 GB, and a 16 MiB file of that
// shape petabytes.
const MaxKeyBytes = 16 << 20

// MaxMapKeys bounds the keys of one map in the config file, and
// MaxKeyPairs the file's maps together (k² summed over its maps, a map used
// through an alias counted at each use): the YAML decoder compares every
// two keys of a map for a repeat, so one map of 150,000 keys (a 1.7 MB
// file) took 52 s to decode, and a 16 MiB file of one map hours. At the
// bound the comparisons take about half a second.
const (
	MaxMapKeys  = 10_000
	MaxKeyPairs = 2 * MaxMapKeys * MaxMapKeys
)

// MaxNodes bounds the config file's YAML nodes (every key, value and list
// item), a node used through an alias counted at each use: the YAML
// decoder's own alias check allows up to about this many, and 16 MiB of
// "1," list items (8 million) took 4.6 s and 1.8 GB to load.
const MaxNodes = 4_000_000

// boundedYAML is koanf's YAML parser with the document held to MaxMapKeys
// before it is decoded and to MaxKeyBytes before koanf flattens it.
type boundedYAML struct{ koanf.Parser }

func (p boundedYAML) Unmarshal(b []byte) (map[string]any, error) {
	if err := notUTF8(b); err != nil {
		return nil, err
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(b, &doc); err != nil { // the parse alone: no key compared
		return nil, err
	}
	if doc.Kind == 0 {
		return nil, nil // an empty file: no keys
	}
	w := pairWalk{onPath: map[*yamlv3.Node]bool{}}
	if err := w.walk(&doc); err != nil {
		return nil, err
	}
	var m map[string]any
	if err := doc.Decode(&m); err != nil {
		return nil, err
	}
	spelt := 0
	for k, v := range m {
		if err := keyBytes(v, []string{k}, len(k), len(k), &spelt); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// notUTF8 names the line and column of the file's first byte that is not
// UTF-8 (the YAML reader says only "invalid leading UTF-8 octet"). A file
// that starts with a UTF-16 byte-order mark is the reader's to decode.
func notUTF8(b []byte) error {
	if bytes.HasPrefix(b, []byte{0xfe, 0xff}) || bytes.HasPrefix(b, []byte{0xff, 0xfe}) || utf8.Valid(b) {
		return nil
	}
	line, col := 1, 1
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return fmt.Errorf("line %d, column %d: byte 0x%02x is not UTF-8 (a file saved as Latin-1 or Windows-1252?); save the file as UTF-8", line, col, b[i])
		}
		if col++; r == '\n' {
			line, col = line+1, 1
		}
		i += n
	}
	return nil
}

// pairWalk counts the pairs of keys the YAML decoder will compare in each
// map of a document, following aliases as the decoder does.
type pairWalk struct {
	pairs, nodes int
	onPath       map[*yamlv3.Node]bool // an alias's targets being walked: a cycle is the decoder's to refuse
}

func (w *pairWalk) walk(n *yamlv3.Node) error {
	if w.nodes++; w.nodes > MaxNodes {
		return fmt.Errorf("line %d: the document has more than %d nodes (config.MaxNodes: keys, values and list items, one used through an alias counted at each use)", n.Line, MaxNodes)
	}
	switch n.Kind {
	case yamlv3.AliasNode:
		if n.Alias == nil || w.onPath[n.Alias] {
			return nil
		}
		w.onPath[n.Alias] = true
		defer delete(w.onPath, n.Alias)
		return w.walk(n.Alias)
	case yamlv3.MappingNode:
		k := len(n.Content) / 2
		if k > MaxMapKeys {
			return fmt.Errorf("line %d: a map of %d keys, more than %d (config.MaxMapKeys): YAML compares every two keys of a map for a repeat", n.Line, k, MaxMapKeys)
		}
		if w.pairs += k * k; w.pairs > MaxKeyPairs {
			return fmt.Errorf("line %d: a map of %d keys, which with the file's other maps (one used through an alias counted at each use) passes %d keys² (config.MaxKeyPairs; config.MaxMapKeys is %d): YAML compares every two keys of a map for a repeat",
				n.Line, k, MaxKeyPairs, MaxMapKeys)
		}
	}
	for _, c := range n.Content {
		if err := w.walk(c); err != nil {
			return err
		}
	}
	return nil
}

// keyBytes adds to spelt what koanf spells for the key path, whose value
// is v: a map's keys in turn, or for a value (an empty map too) its path in
// full once more than its parents and itself (prefixes bytes, pathLen of
// them its own), and fails past MaxKeyBytes naming the key. It counts
// without spelling anything.
func keyBytes(v any, path []string, pathLen, prefixes int, spelt *int) error {
	child := func(k string, v any) error {
		n := pathLen + 1 + len(k)
		return keyBytes(v, append(path, k), n, prefixes+n, spelt)
	}
	switch m := v.(type) {
	case map[string]any:
		for k, v := range m {
			if err := child(k, v); err != nil {
				return err
			}
		}
		if len(m) > 0 {
			return nil
		}
	case map[any]any: // keys that are not strings: koanf prints them
		for k, v := range m {
			switch k.(type) {
			case map[string]any, map[any]any, []any:
				return &Error{Key: keyName(path), Reason: "has a key that is a list or a map; a key is a name"}
			}
			if err := child(fmt.Sprint(k), v); err != nil {
				return err
			}
		}
		if len(m) > 0 {
			return nil
		}
	}
	if *spelt += prefixes + pathLen; *spelt > MaxKeyBytes {
		return &Error{Key: keyName(path), Reason: fmt.Sprintf(
			"the config's keys spelt out in full, each with every parent (channels.x.config.url is 4 keys), pass %d bytes (config.MaxKeyBytes) here: "+
				"a very long key, or keys nested very deep", MaxKeyBytes)}
	}
	return nil
}

// keyName is path as a key, cut past what an error shows of it.
func keyName(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		if b.Len()+len(p) > maxKeyShown {
			b.WriteString(p[:maxKeyShown-b.Len()+1]) // Error cuts it, marked
			break
		}
		b.WriteString(p)
	}
	return b.String()
}

// squasher writes a key as its environment variable's name does: its dots
// and dashes as underscores (lower case: squash).
var squasher = strings.NewReplacer(".", "_", "-", "_")

func squash(key string) string { return squasher.Replace(strings.ToLower(key)) }

// envIndex is the file's keys as envKey matches them, squashed once: a
// variable was matched against every key, squashing each anew (50 variables
// over 100,000 keys took 10 s).
type envIndex struct {
	keys  map[string]string // squashed → the file's key (the first, sorted)
	heads []string          // channels.<name>. and schedules.<name>. the file names
}

func newEnvIndex(fileKeys []string) envIndex {
	x := envIndex{keys: make(map[string]string, len(fileKeys))}
	seen := map[string]bool{}
	for _, key := range fileKeys {
		if sq := squash(key); x.keys[sq] == "" {
			x.keys[sq] = key
		}
		parts := strings.SplitN(key, ".", 3)
		if len(parts) < 2 || (parts[0] != "channels" && parts[0] != "schedules") {
			continue
		}
		if head := parts[0] + "." + parts[1] + "."; !seen[head] {
			seen[head] = true
			x.heads = append(x.heads, head)
		}
	}
	return x
}

// envKey maps NOTIFYD_POSTGRES_URL to postgres.url. An underscore may stand for
// ".", "_" or "-", so the name is matched against the keys the file already
// has and then against the static schema; a name that matches nothing (such as
// NOTIFYD_API_TOKEN, used through ${…}) is ignored.
func (x envIndex) envKey(name string) string {
	flat := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
	if key, ok := x.keys[flat]; ok {
		return key
	}
	// Keys under a named channel or schedule that the file does not set yet:
	// channels.<name>.<field...> with the name taken from the file.
	for _, head := range x.heads {
		if rest, ok := strings.CutPrefix(flat, squash(head)); ok {
			if field := matchSchema(rest, schemaOf(head[:strings.IndexByte(head, '.')])); field != "" {
				return head + field
			}
		}
	}
	return matchSchema(flat, reflect.TypeOf(Config{}))
}

func schemaOf(section string) reflect.Type {
	if section == "channels" {
		return reflect.TypeOf(Channel{})
	}
	return reflect.TypeOf(Schedule{})
}

// typedLike converts an environment value to the type of the value the file
// gives the same key, so a plugin's free-form config (which no struct types)
// gets a bool or a number where the file had one. Strings stay strings: a
// numeric client id must not turn into a number.
func typedLike(fileValue any, v string) any {
	switch fileValue.(type) {
	case bool:
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	case int, int64, float64:
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			return i
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	return v
}

// matchSchema finds the dotted key of struct type t whose squashed form is flat.
func matchSchema(flat string, t reflect.Type) string {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("koanf")
		if flat == tag {
			return tag
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
			if rest, ok := strings.CutPrefix(flat, tag+"_"); ok {
				if sub := matchSchema(rest, f.Type); sub != "" {
					return tag + "." + sub
				}
			}
		}
	}
	return ""
}

// checkKnown rejects a key that no field of Config declares, and a value
// where Config takes nested keys (a list of channels, a scalar for a
// section): koanf flattens maps, so such a key arrives as a leaf.
func checkKnown(key string, value any) error {
	t := reflect.TypeOf(Config{})
	parts := strings.Split(key, ".")
	for i := 0; i < len(parts); i++ {
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByTag(t, parts[i])
			if !ok {
				return &Error{Key: key, Reason: fmt.Sprintf("unknown key %q%s", cutKey(parts[i]), suggest(t))}
			}
			t = f.Type
		case reflect.Map:
			if t.Elem().Kind() == reflect.Interface {
				return nil // free-form: a plugin's config, a payload template
			}
			t = t.Elem()
		default:
			return &Error{Key: key, Reason: fmt.Sprintf("%q takes a value, not nested keys", strings.Join(parts[:i], "."))}
		}
	}
	return checkShape(key, t, value)
}

// checkShape refuses a value given where the schema has nested keys.
func checkShape(key string, t reflect.Type, value any) error {
	if _, ok := value.(map[string]any); ok || value == nil {
		return nil
	}
	if l, ok := value.([]any); ok && len(l) == 0 {
		return nil // `channels: []`: nothing, as the decoder has always read it
	}
	got := "the value " + quote(fmt.Sprint(value))
	if _, ok := value.([]any); ok {
		got = "a list"
	}
	switch t.Kind() {
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return &Error{Key: key, Reason: fmt.Sprintf("takes nested keys (a map), not %s", got)}
		}
		example := "NAME: …"
		if t.Elem().Kind() == reflect.Struct { // its first key: a channel's plugin, a schedule's channel
			example = "NAME:\n      " + t.Elem().Field(0).Tag.Get("koanf") + ": …"
		}
		return &Error{Key: key, Reason: fmt.Sprintf("takes a map from each name to its settings, not %s; write it as\n  %s:\n    %s",
			got, key[strings.LastIndexByte(key, '.')+1:], example)}
	case reflect.Struct:
		return &Error{Key: key, Reason: fmt.Sprintf("takes nested keys%s, not %s", suggest(t), got)}
	}
	return nil
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("koanf") == tag {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func suggest(t reflect.Type) string {
	var names []string
	for i := range t.NumField() {
		names = append(names, t.Field(i).Tag.Get("koanf"))
	}
	sort.Strings(names)
	return " (known: " + strings.Join(names, ", ") + ")"
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// shellRef is a reference in the shell's forms with a default or a check
// (${NAME:-x}, ${NAME-x}, ${NAME:=x}, ${NAME:?x}, ${NAME:+x}), which
// expandEnv does not expand: left as it was, it became the value itself.
var shellRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=?+]`)

// expandEnv replaces ${NAME} in every string value; an unset NAME is an error
// naming the key, so a secret never silently becomes "".
func expandEnv(k *koanf.Koanf, environ []string) error {
	vars := map[string]string{}
	for _, kv := range environ {
		if name, v, ok := strings.Cut(kv, "="); ok {
			vars[name] = v
		}
	}
	// added is what the references expanded so far add to the config:
	// each is replaced by its variable's value however often it occurs, so
	// a small file could otherwise become any size (a 69 KB file of
	// references to a 128 KiB variable held 1.5 GB).
	added := 0
	expand := func(key, s string) (string, error) {
		if ref := shellRef.FindString(s); ref != "" {
			return "", &Error{Key: key, Reason: fmt.Sprintf("%q…: notifyd expands ${NAME} alone, with no default or check; set NAME, or write the value itself", ref)}
		}
		var missing string
		over := false
		out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			v, ok := vars[name]
			if !ok && missing == "" {
				missing = name
			}
			if added += len(v) - len(ref); added > MaxFileBytes || over {
				over = true
				return "" // the whole is refused: build no more of it
			}
			return v
		})
		if missing != "" {
			return "", &Error{Key: key, Reason: fmt.Sprintf("environment variable %s is not set", missing)}
		}
		if over {
			return "", &Error{Key: key, Reason: fmt.Sprintf(
				"the ${NAME} references expanded up to here add more than %d bytes to the config (config.MaxFileBytes, the file's own bound): is a large variable referenced many times?",
				MaxFileBytes)}
		}
		return out, nil
	}
	// The values expanded are set on koanf together, one Set a top-level
	// section: each Set flattens the whole config again, so a Set per value
	// made 16,000 references take minutes.
	changes := map[string]any{}
	change := func(key string, v any) {
		m := changes
		parts := strings.Split(key, ".")
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = v
	}
	for _, key := range k.Keys() {
		switch v := k.Get(key).(type) {
		case string:
			if !strings.Contains(v, "${") {
				continue
			}
			out, err := expand(key, v)
			if err != nil {
				return err
			}
			change(key, out)
		case []any:
			changed := false
			for i, e := range v {
				if s, ok := e.(string); ok && strings.Contains(s, "${") {
					out, err := expand(fmt.Sprintf("%s[%d]", key, i), s)
					if err != nil {
						return err
					}
					v[i], changed = out, true
				}
			}
			if changed {
				change(key, v)
			}
		}
	}
	for section, v := range changes {
		if err := k.Set(section, v); err != nil {
			return err
		}
	}
	return nil
}

// decodeError turns mapstructure's multi-error into one line per key.
func decodeError(err error) error {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "decoding failed due to the following error(s):", "")
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "*"))
		if l != "" && !strings.HasSuffix(l, "error(s) decoding:") {
			lines = append(lines, l)
		}
	}
	// A decoder error may quote the value ("invalid duration \"…\""), which
	// may be a URL with credentials under the wrong key.
	return errors.New("invalid config: " + sdk.RedactURLs(strings.Join(lines, "; ")))
}
