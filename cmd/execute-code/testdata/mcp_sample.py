# Lists a directory and reads three of its files through the MCP filesystem
# server (`--mcp fs=...`), in one parallel batch(), and returns a summary.
import os

d = os.path.join(os.getcwd(), "docs")
listing = fs_list_directory(path=d)["content"]  # structured content arrives as a dict
names = sorted(l[7:] for l in listing.splitlines() if l.startswith("[FILE] "))[:3]
files = batch([("fs_read_text_file", {"path": f"{d}/{n}", "head": 1}) for n in names])
notify(f"read {len(files)} files through the MCP server")
text("\n".join(f"{n}: {f['content'].strip()}" for n, f in zip(names, files)))
