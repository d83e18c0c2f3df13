package main

import (
	"errors"
	"io/fs"
	"path/filepath"

	"falconnic/psp/cmauth"
)

// fabricKeyFile returns the deployment secret the daemons a tool starts
// in dir share (dir/fabric.key, written on first use, mode 0600), or ""
// for an insecure fabric. Every tool that writes two daemons' configs
// (perftest, bench soak, the e2e tests) seals their fabric by default.
func fabricKeyFile(dir string, insecure bool) (string, error) {
	if insecure {
		return "", nil
	}
	path, err := filepath.Abs(filepath.Join(dir, "fabric.key"))
	if err != nil {
		return "", err
	}
	if err := cmauth.GenerateKeyFile(path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return path, nil
}
