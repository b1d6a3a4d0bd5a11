"""A new Gradio session (every API call without one) renders no block up front, and the deep link still gets the
same configs, in the same order, as Gradio's own session state gives."""

from __future__ import annotations

import gradio as gr
from gradio import state_holder

from viewer import gradio_sessions


def _original(blocks: gr.Blocks) -> state_holder.SessionState:
    state = state_holder.SessionState.__new__(state_holder.SessionState)
    gradio_sessions._ORIGINAL_INIT(state, blocks)
    return state


def test_a_new_session_renders_nothing_until_the_deep_link_asks():
    assert gradio_sessions.install()
    with gr.Blocks() as demo:
        boxes = [gr.Textbox(f"box {i}", label=f"b{i}") for i in range(5)]
        gr.Dropdown(["a", "b"], value="a")
        gr.State({"x": 1})
    lazy, original = state_holder.SessionState(demo), _original(demo)
    assert lazy.config_values == {}
    for state in (lazy, original):
        state[boxes[3]._id] = gr.Textbox("changed", label="b3")
        state._update_value_in_config(boxes[1]._id, "typed")
    assert list(lazy.components) == list(original.components)
    assert list(lazy.components) != list(state_holder.SessionState(demo).components)  # the change shows
