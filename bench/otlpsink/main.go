// A minimal OTLP/gRPC trace receiver: every span kube-apiserver exports, one JSON line each.
//
// bench/burst.py points the apiserver's --tracing-config-file at it and reads the file: the
// apiserver's own start and end of each request and of each validating webhook call.
// Usage: otlpsink 127.0.0.1:PORT spans.jsonl
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
)

type span struct {
	Trace  string            `json:"trace"`
	Span   string            `json:"span"`
	Parent string            `json:"parent"`
	Name   string            `json:"name"`
	Start  uint64            `json:"start"`
	End    uint64            `json:"end"`
	Attrs  map[string]string `json:"attrs"`
}

type sink struct {
	collectortrace.UnimplementedTraceServiceServer
	mu  sync.Mutex
	out *bufio.Writer
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return ""
}

func (s *sink) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	encoder := json.NewEncoder(s.out)
	for _, resource := range req.GetResourceSpans() {
		for _, scope := range resource.GetScopeSpans() {
			for _, sp := range scope.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range sp.GetAttributes() {
					attrs[kv.GetKey()] = value(kv.GetValue())
				}
				line := span{
					Trace:  hex.EncodeToString(sp.GetTraceId()),
					Span:   hex.EncodeToString(sp.GetSpanId()),
					Parent: hex.EncodeToString(sp.GetParentSpanId()),
					Name:   sp.GetName(),
					Start:  sp.GetStartTimeUnixNano(),
					End:    sp.GetEndTimeUnixNano(),
					Attrs:  attrs,
				}
				if err := encoder.Encode(line); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := s.out.Flush(); err != nil {
		return nil, err
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: otlpsink ADDR FILE")
	}
	file, err := os.OpenFile(os.Args[2], os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	listener, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(server, &sink{out: bufio.NewWriter(file)})
	log.Fatal(server.Serve(listener))
}
