// Added to a copy of OLM's module at build time as cmd/grpc_health_probe (see
// runner/devtools/cluster/components.py): it builds with the gRPC release OLM already requires.
//
// Command grpc_health_probe asks a gRPC server for its health (grpc.health.v1) and exits
// 0 when it reports SERVING. OLM's catalog operator probes every catalog registry pod
// with `grpc_health_probe -addr=:50051 -rpc-timeout=5s`, so the opm image built here
// carries this program under that name. It accepts the flags OLM passes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	addr := flag.String("addr", "", "address of the gRPC server (host:port; \":port\" means localhost)")
	rpcTimeout := flag.Duration("rpc-timeout", time.Second, "timeout of the health check")
	connectTimeout := flag.Duration("connect-timeout", time.Second, "timeout of the connection")
	service := flag.String("service", "", "the service to check (empty: the server)")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "-addr is required")
		os.Exit(1)
	}
	target := *addr
	if target[0] == ':' {
		target = "localhost" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "connecting to %s: %v\n", target, err)
		os.Exit(2)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *connectTimeout+*rpcTimeout)
	defer cancel()
	reply, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: *service})
	if err != nil {
		fmt.Fprintf(os.Stderr, "health check of %s failed: %v\n", target, err)
		os.Exit(3)
	}
	if reply.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		fmt.Fprintf(os.Stderr, "%s is %s\n", target, reply.GetStatus())
		os.Exit(4)
	}
	fmt.Printf("status: %s\n", reply.GetStatus())
}
