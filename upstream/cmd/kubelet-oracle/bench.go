package main

import (
	"errors"
	"io"
)

// benchConfigs answers `bench`: to be written (issue 14).
func benchConfigs(args []string, in io.Reader, out io.Writer) error {
	return errors.New("kubelet-oracle bench: not written yet")
}
