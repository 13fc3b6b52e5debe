package main

import (
	"errors"
	"io"
)

// listFlags answers `flags`: to be written (issue 14).
func listFlags(out io.Writer) error {
	return errors.New("kubelet-oracle flags: not written yet")
}
