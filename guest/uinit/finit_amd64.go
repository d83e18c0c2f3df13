package main

// sysFinitModule is finit_module(2) on x86-64; the syscall package has no
// constant for it.
const sysFinitModule = 313
