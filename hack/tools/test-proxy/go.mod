// The proxy process of the member-proxy integration test. Not part of the product.
module karmada-rs/hack/tools/test-proxy

go 1.24.0

require (
	github.com/armon/go-socks5 v0.0.0-20160902184237-e75332964ef5
	github.com/elazarl/goproxy v1.9.4
)

require (
	golang.org/x/net v0.50.0 // indirect
	golang.org/x/text v0.34.0 // indirect
)
