package sdk

// Serve runs p as a notifyd provider plugin and never returns: it is the whole
// of a plugin's main. It speaks protocol notifyd.provider.v1 to the host over
// gRPC (hashicorp/go-plugin) and exits when the host goes away.
//
//	func main() { sdk.Serve(&myProvider{}) }
func Serve(p Provider) {
	serve(p)
}

// serve is replaced by the real gRPC server in the next commit; until then a
// plugin built against this compiles and exits at once.
func serve(p Provider) { _ = p }
