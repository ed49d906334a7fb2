// Package golden holds golden PTX files per (model preset, precision, target)
// and the test that diffs freshly generated PTX against them. Regenerate with
// `go test ./golden -update` and review the diff; never edit them by hand.
package golden
