package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"falconnic/psp/cmauth"
)

func init() {
	register("keygen", "write a new fabric deployment secret (the daemon config's fabric.key_file): keygen PATH", keygenCmd)
}

// keygenCmd writes a new key file, mode 0600, never over an existing
// file. Every daemon of one fabric names a copy of the same file.
func keygenCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: falconnic keygen PATH   # then copy PATH (mode 0600) to every daemon of the fabric")
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fl.NArg() != 1 {
		fl.Usage()
		return fmt.Errorf("%w: keygen takes one PATH", errUsage)
	}
	if err := cmauth.GenerateKeyFile(fl.Arg(0)); err != nil {
		return err
	}
	s, err := cmauth.LoadSecret(fl.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (secret fingerprint %s)\n", fl.Arg(0), s.Fingerprint())
	return nil
}
