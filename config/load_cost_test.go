package config

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// allocated is what f allocated, in bytes (the process's: tests that call
// it are not parallel).
func allocated(f func()) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	f()
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - before
}

// TestLoad_KeysSpeltOutBounded: koanf spells every key of the file out in
// full, and every parent of it again for each key under it, so a small file
// of long keys nested deep with many keys at the bottom costs its size times
// their length times the depth. 64 levels of 1,000-byte keys over 1,000
// leaves (an 82 KB file, in a plugin's config, which no schema checks) made
// Load allocate 4.5 GB; a 16 MiB file of that shape would be petabytes.
// Load refuses it naming the key and the bound, before koanf flattens it.
func TestLoad_KeysSpeltOutBounded(t *testing.T) {
	deep := func(depth, keyLen, leaves int) string {
		var b strings.Builder
		b.WriteString(minimal + "channels:\n  x:\n    plugin: webhook\n    config:\n")
		ind := "      "
		for i := range depth {
			fmt.Fprintf(&b, "%s? %s%d\n%s:\n", ind, strings.Repeat("k", keyLen), i, ind)
			ind += "  "
		}
		b.WriteString(ind + "{")
		for i := range leaves {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "l%d: 1", i)
		}
		b.WriteString("}\n")
		return b.String()
	}
	var err error
	grew := allocated(func() { _, err = Load(write(t, deep(64, 1000, 1000)), []string{}) })
	if err == nil || !strings.Contains(err.Error(), `config key "channels.x.config.kkk`) || !strings.Contains(err.Error(), "MaxKeyBytes") {
		t.Errorf("Load = %.300v; want an error naming the key under channels.x.config and config.MaxKeyBytes", err)
	}
	if err != nil && len(err.Error()) > 1024 {
		t.Errorf("the error is %d bytes long; want the key quoted within its bound", len(err.Error()))
	}
	if grew > 64<<20 {
		t.Errorf("Load allocated %d MiB for an 82 KB file; want under 64 MiB", grew>>20)
	}
	// Deep and long keys within the bound still load.
	cfg, err := Load(write(t, deep(8, 100, 100)), []string{})
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.Channels["x"].Config
	for i := range 8 {
		v, _ = v[strings.Repeat("k", 100)+fmt.Sprint(i)].(map[string]any)
	}
	if v["l99"] != 1 {
		t.Errorf("the deepest map = %v, want l0…l99", v)
	}
}

// TestLoad_ReferencesExpandedInOnePass: every ${NAME} expanded was set on
// koanf one at a time, and each Set flattens the whole config again: 4,000
// references in a plugin's config (a 71 KB file) took 14 s and 10 GB,
// 16,000 (293 KB) 3 min 43 s and 165 GB. They are expanded in one pass.
func TestLoad_ReferencesExpandedInOnePass(t *testing.T) {
	const n = 3000
	var b strings.Builder
	b.WriteString(minimal + "http: {tokens: [\"${TOKEN}\", \"x-${TOKEN}\"]}\nchannels:\n  x:\n    plugin: webhook\n    config: {")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "k%d: \"${HOME}/%d\"", i, i)
	}
	b.WriteString("}\n")
	var (
		cfg *Config
		err error
	)
	grew := allocated(func() {
		cfg, err = Load(write(t, b.String()), []string{"HOME=/root", "TOKEN=0123456789abcdef", "NOTIFYD_POSTGRES_URL=${PG}", "PG=postgres://127.0.0.1/e"})
	})
	if err != nil {
		t.Fatal(err)
	}
	// One pass allocates about 13 MiB here (120 under -race, as make test
	// runs it); a Set a reference re-flattened the whole config each time,
	// gigabytes for these 3,000.
	if grew > 256<<20 {
		t.Errorf("Load allocated %d MiB for %d references; want under 256 MiB", grew>>20, n)
	}
	c := cfg.Channels["x"].Config
	for _, i := range []int{0, n / 2, n - 1} {
		if got, want := c[fmt.Sprintf("k%d", i)], fmt.Sprintf("/root/%d", i); got != want {
			t.Errorf("k%d = %v, want %q", i, got, want)
		}
	}
	if got := cfg.HTTP.Tokens; len(got) != 2 || got[0] != "0123456789abcdef" || got[1] != "x-0123456789abcdef" {
		t.Errorf("tokens = %q", got)
	}
	if cfg.Postgres.URL != "postgres://127.0.0.1/e" {
		t.Errorf("postgres.url = %q, want the environment's reference expanded", cfg.Postgres.URL)
	}
}

// TestLoad_ReferencesExpandWithinBound: a ${NAME} reference is replaced by
// the variable's value however often it is referenced, so a small file
// made the config as large as its references times the value: 2,000 values
// of four references to a 128 KiB variable (a 69 KB file) held 1.5 GB
// after Load and allocated 3.9 GB; a 16 MiB file of them, 250 GB. What the
// references add is held to config.MaxFileBytes, as the file is.
func TestLoad_ReferencesExpandWithinBound(t *testing.T) {
	big := "BIG=" + strings.Repeat("x", 128<<10)
	refs := func(n int) string {
		var b strings.Builder
		b.WriteString(minimal + "channels:\n  x:\n    plugin: webhook\n    config: {")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "k%d: \"${BIG}${BIG}${BIG}${BIG}\"", i)
		}
		b.WriteString("}\n")
		return b.String()
	}
	var err error
	grew := allocated(func() { _, err = Load(write(t, refs(200)), []string{big}) }) // 100 MiB expanded
	if err == nil || !strings.Contains(err.Error(), `config key "channels.x.config.k`) || !strings.Contains(err.Error(), "MaxFileBytes") {
		t.Errorf("Load = %.300v; want an error naming a key under channels.x.config and config.MaxFileBytes", err)
	}
	// Refused at 16 MiB of expansion: about 63 MiB allocated (66 under
	// -race), where the 100 MiB expanded in full allocated hundreds.
	if grew > 128<<20 {
		t.Errorf("Load allocated %d MiB; want under 128 MiB", grew>>20)
	}
	// Within the bound: 30 × 512 KiB.
	cfg, err := Load(write(t, refs(30)), []string{big})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Channels["x"].Config["k29"].(string); len(got) != 4*128<<10 {
		t.Errorf("k29 is %d bytes, want %d", len(got), 4*128<<10)
	}
}

// TestLoad_ManyKeysInOneMap: the YAML decoder compares every two keys of a
// map for a repeat, so one map of 150,000 keys (a 1.7 MB file, in a
// plugin's config) took 52 s to load, and a 16 MiB file of one map hours;
// a map aliased again and again is compared again at each use. A map is
// held to config.MaxMapKeys keys, and the file's maps together (each alias
// counted at each use) to config.MaxKeyPairs keys², before the decoder runs.
func TestLoad_ManyKeysInOneMap(t *testing.T) {
	t.Parallel()
	flowMap := func(anchor string, n int) string {
		var b strings.Builder
		b.WriteString(anchor + "{")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "k%d: 1", i)
		}
		return b.String() + "}"
	}
	config := minimal + "channels:\n  x:\n    plugin: webhook\n    config:\n"
	// 60,000 keys in one map: 8 s before.
	err := loadErr(t, config+"      big: "+flowMap("", 60_000)+"\n", nil)
	if err == nil || !strings.Contains(err.Error(), "line 8") || !strings.Contains(err.Error(), "60000 keys") || !strings.Contains(err.Error(), "MaxMapKeys") {
		t.Errorf("a map of 60,000 keys: Load = %.300v; want an error naming its line, its size and config.MaxMapKeys", err)
	}
	// 9,000 keys used 20 times over an alias: 4 s before.
	aliases := config + "      base: " + flowMap("&b ", 9_000) + "\n      uses: [" + strings.TrimSuffix(strings.Repeat("*b, ", 20), ", ") + "]\n"
	err = loadErr(t, aliases, nil)
	if err == nil || !strings.Contains(err.Error(), "MaxKeyPairs") {
		t.Errorf("a map of 9,000 keys used 20 times: Load = %.300v; want an error naming config.MaxKeyPairs", err)
	}
	// Within the bound: a map of 10,000 keys; 7,000 used twice.
	cfg, err := Load(write(t, config+"      m: "+flowMap("", 10_000)+"\n"), []string{})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := cfg.Channels["x"].Config["m"].(map[string]any); len(m) != 10_000 {
		t.Errorf("m has %d keys, want 10,000", len(m))
	}
	if _, err := Load(write(t, config+"      base: "+flowMap("&b ", 7_000)+"\n      uses: [*b]\n"), []string{}); err != nil {
		t.Fatal(err)
	}
	// A repeated key is still refused by the decoder.
	if err := loadErr(t, config+"      m: {a: 1, a: 2}\n", nil); err == nil || !strings.Contains(err.Error(), "already defined") {
		t.Errorf("a repeated key: Load = %v; want the decoder's refusal", err)
	}
}

// TestLoad_EnvOverridesOverManyKeys: each NOTIFYD_ variable was matched
// against every key of the file, squashing each key anew (a strings.Replacer
// built per key), and one that matched no key copied the whole config (koanf's
// Get("")): 50 variables over 100,000 keys (an 890 KB file) took 10 s and
// 6.6 GB, where the file alone took 0.8 s. The keys are squashed once, and a
// variable that names no key is not looked up.
func TestLoad_EnvOverridesOverManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString(minimal + "channels:\n  x:\n    plugin: webhook\n    config:\n")
	for m := range 100 {
		fmt.Fprintf(&b, "      m%d: {", m)
		for i := range 1000 {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "k%d: 1", i)
		}
		b.WriteString("}\n")
	}
	p := write(t, b.String())
	var err error
	alone := allocated(func() { _, err = Load(p, []string{}) })
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"NOTIFYD_CHANNELS_X_CONFIG_M5_K7=2", "NOTIFYD_CHANNELS_X_CONCURRENCY=7"}
	for i := range 48 {
		env = append(env, fmt.Sprintf("NOTIFYD_NOT_A_KEY_%d=1", i))
	}
	var cfg *Config
	withEnv := allocated(func() { cfg, err = Load(p, env) })
	if err != nil {
		t.Fatal(err)
	}
	if withEnv > 2*alone+64<<20 {
		t.Errorf("Load allocated %d MiB with 50 NOTIFYD_ variables, %d MiB without; want under twice as much and 64 MiB", withEnv>>20, alone>>20)
	}
	m5, _ := cfg.Channels["x"].Config["m5"].(map[string]any)
	if got := fmt.Sprint(m5["k7"]); got != "2" || cfg.Channels["x"].Concurrency != 7 {
		t.Errorf("m5.k7 = %s, concurrency %d; want the environment's 2 and 7", got, cfg.Channels["x"].Concurrency)
	}
}
