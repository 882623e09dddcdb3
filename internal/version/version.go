// Package version holds the build version of the muster binaries, stamped
// by the Makefile with -ldflags.
package version

// Version is set at build time; "dev" for a plain go build.
var Version = "dev"
