// Package examples holds notifyd's examples, one per directory; its test
// checks that they stand alone (standalone_test.go).
package examples
