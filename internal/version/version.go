// Package version holds the build's version, set by the Makefile's -ldflags.
package version

// Version is notifyd's version; "dev" for a build outside make.
var Version = "dev"
