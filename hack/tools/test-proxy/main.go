// A proxy for the member-proxy integration test (tests/tests/integration/member_proxy.rs): an HTTP CONNECT
// proxy (github.com/elazarl/goproxy), optionally served over TLS, or a SOCKS5 proxy
// (github.com/armon/go-socks5). It writes one JSON line to stdout per tunnel it opens, with the
// target the client asked for, the address it dialled and the CONNECT request's headers, so the
// test can assert which traffic went through it. --map rewrites a requested host:port to another
// address, so a member can be given an endpoint only the proxy can reach. Not part of the product.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/armon/go-socks5"
	"github.com/elazarl/goproxy"
)

type entry struct {
	Proxy   string              `json:"proxy"`
	Target  string              `json:"target"`
	Dialed  string              `json:"dialed"`
	User    string              `json:"user,omitempty"`
	Headers map[string][]string `json:"headers,omitempty"`
}

var (
	mu  sync.Mutex
	out = json.NewEncoder(os.Stdout)
)

func record(e entry) {
	mu.Lock()
	defer mu.Unlock()
	_ = out.Encode(e)
}

type mapping map[string]string

func (m mapping) String() string { return fmt.Sprint(map[string]string(m)) }

func (m mapping) Set(v string) error {
	from, to, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("--map wants from=to, got %q", v)
	}
	m[from] = to
	return nil
}

func (m mapping) dialed(target string) string {
	if to, ok := m[target]; ok {
		return to
	}
	return target
}

// rewriter maps SOCKS5 destinations through --map and records each tunnel.
type rewriter struct{ m mapping }

func (r rewriter) Rewrite(ctx context.Context, req *socks5.Request) (context.Context, *socks5.AddrSpec) {
	host := req.DestAddr.FQDN
	if host == "" {
		host = req.DestAddr.IP.String()
	}
	target := net.JoinHostPort(host, strconv.Itoa(req.DestAddr.Port))
	dialed := r.m.dialed(target)
	user := ""
	if req.AuthContext != nil {
		user = req.AuthContext.Payload["Username"]
	}
	record(entry{Proxy: "socks5", Target: target, Dialed: dialed, User: user})
	h, p, err := net.SplitHostPort(dialed)
	if err != nil {
		return ctx, req.DestAddr
	}
	port, _ := strconv.Atoi(p)
	return ctx, &socks5.AddrSpec{IP: net.ParseIP(h), Port: port}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	mode := flag.String("mode", "http", "http (CONNECT) or socks5")
	cert := flag.String("tls-cert", "", "serve the HTTP proxy over TLS with this certificate (PEM)")
	key := flag.String("tls-key", "", "the key of --tls-cert (PEM)")
	user := flag.String("user", "", "SOCKS5: require this username (with --password)")
	password := flag.String("password", "", "SOCKS5: the password of --user")
	m := mapping{}
	flag.Var(m, "map", "host:port=host:port: dial the second when a client asks for the first (repeatable)")
	flag.Parse()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen %s: %v", *listen, err)
	}
	fmt.Fprintf(os.Stderr, "test-proxy: %s proxy listening on %s\n", *mode, ln.Addr())

	switch *mode {
	case "socks5":
		conf := &socks5.Config{Rewriter: rewriter{m}, Logger: log.New(os.Stderr, "socks5: ", 0)}
		if *user != "" {
			conf.Credentials = socks5.StaticCredentials{*user: *password}
		}
		srv, err := socks5.New(conf)
		if err != nil {
			log.Fatalf("socks5: %v", err)
		}
		log.Fatal(srv.Serve(ln))
	case "http":
		proxy := goproxy.NewProxyHttpServer()
		proxy.Logger = log.New(io.Discard, "", 0)
		proxy.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
			dialed := m.dialed(host)
			record(entry{Proxy: "http", Target: host, Dialed: dialed, Headers: ctx.Req.Header})
			return goproxy.OkConnect, dialed
		})
		// Only tunnels: a request forwarded in absolute form is refused.
		proxy.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "only CONNECT", http.StatusMethodNotAllowed)
		})
		srv := &http.Server{Handler: proxy, TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
		if *cert != "" {
			log.Fatal(srv.ServeTLS(ln, *cert, *key))
		}
		log.Fatal(srv.Serve(ln))
	default:
		log.Fatalf("unknown --mode %q", *mode)
	}
}
