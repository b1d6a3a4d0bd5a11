"""The screen: the berth chart, pure renderers (a Record or events in; chat messages, Markdown out), what Run and
the Arena share, the Gradio sections (Run, Arena, Browse, Play) built from them and the share pages. See
ARCHITECTURE.md."""
