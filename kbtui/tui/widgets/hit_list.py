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


def hit_prompt(
    rank: int, hit: Hit, query: str | QueryHighlighter, *, width: int, explain: bool, fallback_name: str | None,
    fusion: str | None = None, show_collection: bool = False,
) -> Text:
    """The lines one hit takes in the list."""
    width = max(20, width)
    prompt = Text(no_wrap=True, overflow="ellipsis")
    prompt.append(f"{rank:>2}. ", style="bold")
    prompt.append(hit_title(hit, fallback_name), style="bold")
    meta = [printable(hit.collection_id)] if show_collection else []
    meta.append(printable(hit.source_path) or fallback_name or hit.document_id[:12])
    if hit.page is not None:
        meta.append(f"p.{hit.page}")
    if hit.kind and hit.kind != "prose":
        meta.append(hit.kind)
    meta.append(f"{hit.score_kind} {hit.score:.4f}")
    if hit.more_in_document:
        # The long form when it fits the line, else the count alone.
        more = f"+{hit.more_in_document} more in this document"
        fits = len(" · ".join(meta)) + 3 + len(more) <= width - 4
        meta.append(more if fits else f"+{hit.more_in_document} more")
    prompt.append("\n    ")
    prompt.append(" · ".join(meta), style="dim")
    prompt.append("\n    ")
    prompt.append_text(highlighted_snippet(hit.text, query, width - 6))
    if explain:
        prompt.append("\n    ")
        prompt.append_text(explain_text(hit, fusion))
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
