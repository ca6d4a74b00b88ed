"""The one HTML builder escapes every value, keeps deliberate markup, and refuses a value the page does not get."""

from __future__ import annotations

import jinja2
import pytest
from markupsafe import Markup

from switchover.htmlpage import render_page


def test_a_value_is_escaped_and_deliberate_markup_is_kept() -> None:
    page = render_page("<p>{{ name }}</p>{{ fig }}", name="<script>x</script>", fig=Markup("<div id=f></div>"))
    assert page == "<p>&lt;script&gt;x&lt;/script&gt;</p><div id=f></div>"


def test_a_value_the_template_reads_but_was_not_given_is_an_error_not_an_empty_string() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render_page("<p>{{ missing }}</p>")
