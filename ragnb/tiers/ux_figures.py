"""Tier UX charts and the summary table the ``tier_ux`` notebook shows (the numbers: :mod:`ragnb.tiers.ux`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def similarity_chart(per_turn: pd.DataFrame, break_threshold: float | None, max_sessions_listed: int = 200):
    """Similarity of each turn to the previous one: a thin line per session plus, per source, a thick line
    of the mean over its sessions at each turn position. A selector shows all sessions, one source, or one
    session (the first ``max_sessions_listed``). The break threshold is drawn when given (None: the breaks are cut
    on another signal, or there is no break rate)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    pairs = per_turn[per_turn["similarity"].notna()]
    sessions = list(pd.unique(pairs["session_id"]))
    sources = [str(s) for s in pd.unique(pairs["source"])]
    many = len(sessions) > 12
    src_of = {}
    for sid in sessions:
        d = pairs[pairs["session_id"] == sid]
        src_of[sid] = str(d["source"].iloc[0])
        fig.add_trace(go.Scatter(
            x=d["turn"], y=d["similarity"], mode="lines+markers", name=str(sid), legendgroup=src_of[sid],
            customdata=np.stack([d["previous_question"].fillna(""), d["question"].fillna("")], axis=1),
            hovertemplate="%{fullData.name} turn %{x}<br>similarity %{y:.3f}<br>previous: %{customdata[0]}"
                          "<br>current: %{customdata[1]}<extra></extra>",
            line={"width": 1}, marker={"size": 3 if many else 5}, opacity=0.45 if many else 0.85, showlegend=not many,
        ))
    for src in sources:
        mean = pairs[pairs["source"] == src].groupby("turn")["similarity"].agg(["mean", "count"]).reset_index()
        fig.add_trace(go.Scatter(
            x=mean["turn"], y=mean["mean"], mode="lines", name=f"mean over {src} sessions", customdata=mean["count"],
            hovertemplate="mean at turn %{x}: %{y:.3f} (%{customdata} sessions)<extra></extra>",
            line={"width": 4, "color": "black"}, showlegend=True,
        ))
    if break_threshold is not None:
        fig.add_hline(y=break_threshold, line_dash="dash", line_color="red",
                      annotation_text=f"break threshold {break_threshold:g}")

    def view(label: str, session_on, source_on):
        visible = [bool(session_on(sid)) for sid in sessions] + [bool(source_on(s)) for s in sources]
        return {"label": label, "method": "update", "args": [{"visible": visible}, {"xaxis.autorange": True}]}

    buttons = [view(f"all sessions ({len(sessions)})", lambda sid: True, lambda s: True)]
    active = 0
    if len(sources) > 1:
        buttons += [view(f"source: {src}", lambda sid, src=src: src_of[sid] == src, lambda s, src=src: s == src)
                    for src in sources]
        # Sessions of very different lengths squash each other on one axis (one 215-turn dialogue next to
        # 10-turn ones): open on the source with the most sessions; "all sessions" stays one click away.
        top = max(sources, key=lambda src: sum(src_of[sid] == src for sid in sessions))
        active = 1 + sources.index(top)
        for trace, on in zip(fig.data, buttons[active]["args"][0]["visible"]):
            trace.visible = on
    buttons += [view(str(sid), lambda x, sid=sid: x == sid, lambda s: False) for sid in sessions[:max_sessions_listed]]
    fig.update_layout(
        title="Similarity between consecutive questions (cosine, per session)", height=480,
        xaxis_title="turn (position in the session)", yaxis_title="cosine similarity to the previous question",
        updatemenus=[{"buttons": buttons, "active": active, "direction": "down", "x": 1.0, "xanchor": "right",
                      "y": 1.15, "yanchor": "top", "showactive": True}],
    )
    return fig


def similarity_by_flag_chart(per_turn: pd.DataFrame, break_threshold: float | None):
    """Distribution of consecutive-turn similarity per source, split by the human needs-context flag where known."""
    import plotly.express as px

    pairs = per_turn[per_turn["similarity"].notna()].copy()
    if "needs_context" in pairs:
        flag = pairs["needs_context"].map({True: "needs context (human flag)", False: "self-contained"})
        pairs["turn kind"] = flag.astype(object).where(flag.notna(), "not annotated")
    else:
        pairs["turn kind"] = "not annotated"
    fig = px.box(pairs, x="source", y="similarity", color="turn kind", points="outliers",
                 title="Consecutive-turn similarity by source and by whether the turn needed earlier context")
    if break_threshold is not None:
        fig.add_hline(y=break_threshold, line_dash="dash", line_color="red")
    fig.update_layout(height=420, yaxis_title="cosine similarity to the previous question")
    return fig


def break_signal_chart(per_turn: pd.DataFrame, break_threshold: float | None, signal: str = "question"):
    """The similarity the break flags are cut on, per consecutive pair, split by the cited-page oracle: the turn
    cites the same page as the previous one, another page, or one of them cites none. Where the two boxes overlap,
    no threshold can tell a follow-up from a topic change. The threshold is drawn when there is a break rate."""
    import plotly.express as px

    column = "break_similarity" if "break_similarity" in per_turn else "similarity"
    pairs = per_turn[per_turn[column].notna()].copy()
    if "page_change" in pairs:
        kind = pairs["page_change"].map({True: "cites another page", False: "cites the same page"})
        pairs["oracle"] = kind.astype(object).where(kind.notna(), "no cited page on one side")
    else:
        pairs["oracle"] = "no cited pages"
    label = f"cosine to the previous turn ({signal})"
    pairs[label] = pairs[column].astype(float)
    fig = px.box(pairs, x="oracle", y=label, points="all", hover_data=["session_id", "turn", "question"],
                 title="Break signal by whether the turn cites the same page as the previous turn")
    if break_threshold is not None:
        fig.add_hline(y=break_threshold, line_dash="dash", line_color="red",
                      annotation_text=f"break below {break_threshold:.4g}")
    fig.update_layout(height=420)
    return fig


def cache_similarity_histogram(per_query: pd.DataFrame, tau: float, model: str = ""):
    """Each question's best similarity to the cache (the model's nearest-neighbour distribution), with the hit
    threshold τ (hit: strictly above τ); where the log cites pages, coloured by whether the best match cites
    the same page, another page, or none can be judged."""
    import plotly.express as px

    col = "max cosine similarity to the cache"
    frame = pd.DataFrame({col: per_query["max_similarity"].astype(float)})
    color = None
    if "same_page" in per_query and per_query["same_page"].notna().any():
        kind = per_query["same_page"].map({1.0: "best match cites the same page", 0.0: "best match cites another page"})
        frame["best match"] = kind.fillna("no cited page on one side")
        color = "best match"
    frame = frame[frame[col].notna()]
    title = f"Best match in the score-5 cache per question (hit: similarity > τ = {tau:g})"
    fig = px.histogram(frame, x=col, color=color, nbins=40, barmode="stack",
                       title=title + (f" — {model}: τ depends on the model" if model else ""))
    fig.add_vline(x=tau, line_dash="dash", line_color="red", annotation_text=f"τ = {tau:g}")
    fig.update_layout(height=380, bargap=0.05)
    return fig


def tau_curve_chart(curve: pd.DataFrame, tau: float, calibrated_tau: float | None, target_precision: float):
    """Cache-hit precision and hit rate against τ: exactly the rows of ``curve`` (the table beside it, from
    :func:`ragnb.metrics.ux_thresholds.calibrate_tau`), as steps — both change only at observed similarities."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, column in (("precision of hits (same page)", "precision"), ("hit rate", "hit_rate")):
        fig.add_trace(go.Scatter(x=curve["tau"], y=curve[column], mode="lines+markers", name=name, line_shape="hv",
                                 customdata=curve[["n_hits", "n_judged"]].to_numpy(),
                                 hovertemplate="τ %{x:.4f}: %{y:.3f} (%{customdata[0]} hits, %{customdata[1]} judged)"
                                               "<extra></extra>"))
    fig.add_hline(y=target_precision, line_dash="dot", line_color="grey",
                  annotation_text=f"target precision {target_precision:g}")
    fig.add_vline(x=tau, line_dash="dash", line_color="red", annotation_text=f"τ used {tau:.3f}")
    if calibrated_tau is not None and calibrated_tau != tau:
        fig.add_vline(x=calibrated_tau, line_dash="dash", line_color="green",
                      annotation_text=f"calibrated τ {calibrated_tau:.3f}", annotation_position="bottom right")
    fig.update_layout(title="Cache hits against τ: precision (hits citing the same page) and hit rate", height=420,
                      xaxis_title="τ (a hit needs similarity > τ)", yaxis_title="share", yaxis_range=[0, 1.02])
    return fig


def summary_rows(summary: dict) -> pd.DataFrame:
    """The headline aggregates overall and per source, one row each, for the report table. ``scope`` names
    where the questions came from (a demo source with its language, or the question log's label);
    ``not_applicable`` counts one-turn sessions, which have no continuity to measure."""
    rows = []

    def add(scope: str, name: str, agg: dict) -> None:
        lo, hi = (agg.get("ci95") or [math.nan, math.nan])[:2]
        rows.append({"scope": scope, "metric": name, "mean": agg.get("mean"), "ci95_low": lo, "ci95_high": hi,
                     "n": agg.get("n"), "n_valid": agg.get("n_valid"), "n_failed": agg.get("n_failed"),
                     "not_applicable": agg.get("n_not_applicable", 0)})

    for name in ("cache_hit_rate", "cache_hit_precision", "context_preservation", "multi_turn_consistency",
                 "context_break_rate"):
        if name in summary:
            add("all", name, summary[name])
    val = summary.get("tau_validation")
    if val and val.get("possible"):  # beside the in-sample precision: the calibrated τ on held-out users
        add("all", "cache_hit_precision (out of sample)", val["precision"])
    for src, block in summary.get("per_source", {}).items():
        lang = block.get("language")
        scope = f"{src} ({lang})" if isinstance(lang, str) else str(block.get("label") or src)
        for name in ("context_preservation", "multi_turn_consistency", "context_break_rate"):
            add(scope, name, block[name])
        det = block.get("needs_context_detection")
        if det:
            add(scope, "needs_context_auc (1 - similarity)", det["roc_auc"])
    check = summary.get("break_validation") or {}
    for signal, auc in (check.get("signals") or {}).items():  # how well each signal finds page changes
        add("all", f"page_change_auc ({signal})", auc)
    if check.get("at_threshold"):
        add("all", f"break_agreement (majority baseline {check['majority_baseline']:.3f})",
            check["at_threshold"]["accuracy"])
    frame = pd.DataFrame(rows)
    for col in ("n", "n_valid", "n_failed", "not_applicable"):
        frame[col] = frame[col].astype("Int64")
    return frame
