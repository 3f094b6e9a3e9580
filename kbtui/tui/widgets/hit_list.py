"""Search hits as a keyboard-navigable list: heading trail, provenance, score
kind, a highlighted snippet and, on demand, why each hit ranked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.widgets.option_list import Option

from kbtui.chunking import HEADING_SEPARATOR
from kbtui.printable import printable
from kbtui.retrieval.search import Hit
from kbtui.retrieval.snippets import QueryHighlighter
from kbtui.tui.widgets.cells import fit
from kbtui.tui.widgets.lists import Choices
from kbtui.tui.widgets.snippet import highlighted_snippet

TRAIL_SEPARATOR = " › "

# Plain words for the degradation codes search reports (kbtui.retrieval.search).
DEGRADATION_TEXT = {
    "embedder_unavailable": "the embedding model is unavailable, so only word matches are shown",
    "vector_failed": "the meaning (vector) search failed, so only word matches are shown",
    "lexical_failed": "the word (lexical) search failed, so only meaning matches are shown",
    "reranker_cold": "the reranker is not running yet (it is being started); fusion order",
    "reranker_busy": "the reranker is busy; fusion order",
    "reranker_deadline": "the reranker ran out of time; fusion order",
    "reranker_malformed": "the reranker answered nonsense; fusion order",
    "reranker_failed": "the reranker failed; fusion order",
    "reranker_skipped_agree": "reranking skipped: both arms agree on the top hit",
    "reranker_skipped_small_pool": "reranking skipped: too few candidates",
    "reranker_skipped_budget": "reranking skipped: the time budget was spent",
}


def degradation_text(codes: Sequence[str]) -> str:
    """One sentence naming every way this search was degraded."""
    return "Degraded: " + "; ".join(DEGRADATION_TEXT.get(code, code.replace("_", " ")) for code in codes) + "."


def hit_title(hit: Hit, fallback_name: str | None) -> str:
    """The heading trail, else the source path, else the operator's own file name."""
    if hit.heading_path:
        return printable(hit.heading_path).replace(HEADING_SEPARATOR, TRAIL_SEPARATOR)
    return printable(hit.source_path) or fallback_name or f"document {hit.document_id[:12]}"


FUSION_WORDS = {"rrf": "rank fusion (RRF)", "score_aware": "score-aware fusion", "convex": "convex fusion"}


def explain_text(hit: Hit, fusion: str | None = None) -> Text:
    """Why the hit ranked: each arm's rank and how the score was made
    (``fusion`` is the strategy the search used, when known)."""
    arms = []
    if hit.lexical_rank is not None:
        arms.append(f"words #{hit.lexical_rank}")
    if hit.vector_rank is not None:
        arms.append(f"meaning #{hit.vector_rank}")
    if not arms:
        why = "no arm rank recorded"
    elif len(arms) == 1:
        missing = "no meaning match" if hit.vector_rank is None else "no word match"
        why = f"{arms[0]} only ({missing})"
    else:
        why = ", ".join(arms) + " (both arms)"
    if hit.score_kind == "Rerank":
        moved = f" from fused #{hit.fusion_rank}" if hit.fusion_rank is not None else ""
        how = f"reranked by the cross-encoder{moved}"
    else:
        how = "by " + FUSION_WORDS.get(fusion or "", fusion or "rank fusion")
    return Text(f"why: {why} · {how}", style="italic")


def meta_line(hit: Hit, width: int, fallback_name: str | None, show_collection: bool) -> str:
    """Where the hit is from and how it scored, in ``width``: long words give way
    first, then the source path is cut in its middle; the score and the count of
    the document's other chunks stay."""
    source = printable(hit.source_path) or fallback_name or hit.document_id[:12]
    before = [printable(hit.collection_id)] if show_collection else []
    after = [f"p.{hit.page}"] if hit.page is not None else []
    if hit.kind and hit.kind != "prose":
        after.append(hit.kind)
    more = hit.more_in_document
    line = ""
    for score, more_text in (
        (f"{hit.score_kind} {hit.score:.4f}", f"+{more} more in this document"),
        (f"{hit.score_kind} {hit.score:.4f}", f"+{more} more"),
        (f"{hit.score:.2f}", f"+{more} more"),
    ):
        line = " · ".join([*before, source, *after, score, *([more_text] if more else [])])
        if len(line) <= width:
            return line
    return line.replace(source, fit(source, max(8, width - (len(line) - len(source)))), 1)


def hit_prompt(
    rank: int, hit: Hit, query: str | QueryHighlighter, *, width: int, explain: bool, fallback_name: str | None,
    fusion: str | None = None, show_collection: bool = False,
) -> Text:
    """The lines one hit takes in the list, each cut to ``width`` (never wrapped:
    a wrapped title or meta line leaves a word alone on the next line)."""
    width = max(20, width)
    title = Text(f"{rank:>2}. ", style="bold")
    title.append(hit_title(hit, fallback_name), style="bold")
    lines = [title, Text("    ") + Text(meta_line(hit, width - 4, fallback_name, show_collection), style="dim"),
             Text("    ") + highlighted_snippet(hit.text, query, width - 6)]
    if explain:
        lines.append(Text("    ") + explain_text(hit, fusion))
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    prompt = Text("\n").join(lines)
    prompt.no_wrap = True
    return prompt


class HitList(Choices):
    """The results; the option id is the hit's index in the response."""

    def show(
        self, hits: Sequence[Hit], query: str, *, explain: bool, names: Mapping[str, str], width: int,
        fusion: str | None = None, show_collection: bool = False,
    ) -> None:
        highlighted = self.highlighted
        self.clear_options()
        highlighter = QueryHighlighter.for_query(query)
        self.add_options(
            Option(
                hit_prompt(rank, hit, highlighter, width=width, explain=explain,
                           fallback_name=names.get(hit.document_id), fusion=fusion, show_collection=show_collection),
                id=str(rank - 1),
            )
            for rank, hit in enumerate(hits, start=1)
        )
        if hits:
            self.highlighted = min(highlighted or 0, len(hits) - 1)
