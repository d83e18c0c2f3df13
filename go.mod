module falconnic

go 1.26.8

require (
	github.com/gopacket/gopacket v1.7.7
	github.com/mdlayher/vsock v1.4.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/mdlayher/socket v0.8.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
