package pluginhost

// SetAfterVerify installs a hook that runs between the checksum check and
// the start of a pinned plugin; the returned func removes it.
func SetAfterVerify(f func(path string)) func() {
	afterVerify = f
	return func() { afterVerify = nil }
}

// OutputTaken is how many bytes of output the host has taken from p's
// current process (its pipes and go-plugin's stdio streams); -1 while down.
func OutputTaken(p *Plugin) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inst == nil {
		return -1
	}
	return p.inst.run.output.taken.Load()
}

// FramesTaken is how many units of HTTP/2 frames (FrameRate's) the host has
// read from p's current process's gRPC connection; -1 while down.
func FramesTaken(p *Plugin) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inst == nil {
		return -1
	}
	return p.inst.run.frames.Load()
}
