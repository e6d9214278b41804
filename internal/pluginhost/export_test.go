package pluginhost

// SetAfterVerify installs a hook that runs between the checksum check and
// the start of a pinned plugin; the returned func removes it.
func SetAfterVerify(f func(path string)) func() {
	afterVerify = f
	return func() { afterVerify = nil }
}
