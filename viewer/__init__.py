"""The screen: pure renderers (events or a record in; chat messages, berth charts, Markdown out) and the Gradio
sections (Run, Browse, Play) built from them. See ARCHITECTURE.md."""
