// Package deps holds the import policy of the module as a test, in the manner of Go's own
// go/build deps_test.go: which package may import which. The policy is in deps_test.go; the
// package has no code of its own.
package deps
