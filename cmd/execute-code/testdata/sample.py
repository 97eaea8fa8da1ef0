# A sample execute_code script: it explores the tool root through helpers,
# streams progress with notify(), and returns its answer with text().
notify("listing the tree")
listing = ls(".", recursive=True, max_depth=2)
go_files = find("**/*.go", max_results=2000)
notify(f"{len(go_files.splitlines())} Go files found")

# Three helper calls dispatched in parallel.
readme, mod, todo = batch([
    ("read", {"path": "README.md", "limit": 3}),
    ("read", {"path": "go.mod", "limit": 1}),
    ("grep", {"pattern": "TODO", "glob": "**/*.go", "max_results": 5}),
])

text("module: " + mod.splitlines()[0].split("\t", 1)[-1].strip())
text("README starts with: " + readme.splitlines()[0].split("\t", 1)[-1])
text(f"entries two levels deep: {len(listing.splitlines())}, Go files: {len(go_files.splitlines())}, TODO lines: {len(todo.splitlines())}")
# wordcount is the host tool --sample-host-tool registers: it answers a dict.
counts = wordcount(text=readme)
text(f"host tool wordcount on the README's first lines: {counts['words']} words, {counts['lines']} lines")
try:
    read("no/such/file.txt")
except ToolError as e:
    text("a failed helper raises ToolError: " + str(e))
print("this line is diagnostics, not the result")
