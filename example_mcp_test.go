package executecode_test

import (
	"context"
	"fmt"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// An MCP server as a tool source, here one the host runs itself and
// reaches through an SDK transport; WithMCPServer(name, command, args...)
// starts a server's command instead. Its tools become helpers named
// <server>_<tool>, governed by policy, approvals and budgets like every
// helper.
func ExampleWithMCP() {
	server := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1"}, nil)
	type query struct {
		City string `json:"city"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "forecast", Description: "Tomorrow's forecast for a city."},
		func(_ context.Context, _ *mcp.CallToolRequest, q query) (*mcp.CallToolResult, map[string]string, error) {
			return nil, map[string]string{"city": q.City, "sky": "clear"}, nil
		})
	serverSide, clientSide := mcp.NewInMemoryTransports()
	ctx := context.Background()
	session, err := server.Connect(ctx, serverSide, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	cfg := config.Defaults()
	cfg.Enabled = true
	rt, err := executecode.New(cfg, executecode.WithMCP(executecode.MCPServer{
		Name: "weather", Transport: clientSide, Trusted: true})) // Trusted: its results are the host's own
	if err != nil {
		log.Fatal(err) // a server that did not start wraps executecode.ErrMCP and is named
	}
	defer rt.Close(ctx) // stops the servers it started

	fmt.Println(rt.Helpers())
	res, err := rt.Execute(ctx, executecode.Call{Script: `f = weather_forecast(city="Oslo")  # structured content: a dict
text(f["city"] + ": " + f["sky"])`})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Blocks, res.Trust)
	// Output:
	// [read grep find ls webfetch weather_forecast]
	// [Oslo: clear] trusted
}
