"""The detailed-results page: self-contained, escaped, with protocol sections only when relevant."""

import base64
import re

import pytest

from submission_api.report import format_duration, write_detailed_results
from submission_api.scoring import TaskRecord, summarize_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_records(groups=("test",), datasets=("alpha", "beta")):
    records = []
    for i in range(6):
        records.append(
            TaskRecord(
                id=i,
                dataset=datasets[i % len(datasets)],
                group=groups[i % len(groups)],
                n_ways=2 + i % 3,
                n_shots=1 + i % 2,
                score=0.1 * i,
                accuracy=0.5 + 0.05 * i,
                worst_class_accuracy=0.02 * i,
            )
        )
    return records


def render(tmp_path, records, **kwargs):
    path = write_detailed_results(
        summarize_run(records), records, tmp_path / "out" / "detailed_results.html", **kwargs
    )
    return path.read_text(encoding="utf-8")


def test_page_embeds_three_png_plots_as_data_uris(tmp_path):
    html = render(tmp_path, make_records())
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(uris) == 3
    assert all(base64.b64decode(u).startswith(PNG_MAGIC) for u in uris)
    for caption in ("vs ways", "vs shots", "per dataset"):
        assert f"Normalized accuracy {caption}" in html


def test_page_is_self_contained(tmp_path):
    html = render(tmp_path, make_records())
    assert not re.search(r'(src|href)="(?!data:)', html)
    assert "<script" not in html and "@import" not in html and "url(" not in html


def test_page_has_one_row_per_task_and_the_headline(tmp_path):
    records = make_records()
    html = render(tmp_path, records, title="Run 3", duration_s=75)
    assert html.count('<tr class="task">') == len(records)
    assert "<td>0.500</td>" in html  # task 5's score
    summary = summarize_run(records)
    assert f"{summary.mean:.3f} &plusmn; {summary.ci95:.3f}" in html
    assert "Run 3" in html and "1 min 15 s" in html


def test_all_text_is_escaped(tmp_path):
    records = make_records(datasets=("<script>alert(1)</script>", "a&b"))
    html = render(tmp_path, records, title="<b>T</b>", extra={"<k>": '"v" <i>'})
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "a&amp;b" in html and "&lt;b&gt;T&lt;/b&gt;" in html
    assert "&lt;k&gt;" in html and "&#34;v&#34; &lt;i&gt;" in html


def test_dollar_signs_in_dataset_names_do_not_break_the_plots(tmp_path):
    html = render(tmp_path, make_records(datasets=("$x^$", "cost $5")))
    assert html.count("data:image/png;base64,") == 3


def test_plain_run_has_no_protocol_sections(tmp_path):
    html = render(tmp_path, make_records())
    assert 'id="id-ood"' not in html
    assert 'id="fewstab"' not in html
    assert 'id="md-interval"' not in html


def test_id_ood_section_lists_the_groups_present(tmp_path):
    html = render(tmp_path, make_records(groups=("BaseGen", "NovelGen")))
    assert 'id="id-ood"' in html
    section = html.split('id="id-ood"')[1].split("</section>")[0]
    assert '<td class="text">BaseGen</td>' in section
    assert '<td class="text">NovelGen</td>' in section
    assert '<td class="text">ValGen</td>' not in section
    assert 'id="fewstab"' not in html


def test_fewstab_section_shows_both_waccs_and_the_gap(tmp_path):
    records = make_records(groups=("fewstab-A", "fewstab-R"))
    html = render(tmp_path, records)
    section = html.split('id="fewstab"')[1].split("</section>")[0]
    assert "wAcc-A" in section and "wAcc-R" in section
    gap = summarize_run(records).wacc_gap
    assert f"<td>{gap:.3f}</td>" in section
    assert "worst class" in html
    assert 'id="id-ood"' not in html


def test_fewstab_without_random_tasks_has_no_gap(tmp_path):
    html = render(tmp_path, make_records(groups=("fewstab-A",)))
    assert 'id="fewstab"' in html and 'id="fewstab-gap"' not in html


def test_meta_dataset_interval_appears_for_that_protocol(tmp_path):
    records = make_records()
    html = render(tmp_path, records, protocol="meta-dataset")
    assert 'id="md-interval"' in html
    assert f"{summarize_run(records).md_ci95:.3f}" in html


def test_single_task_run_renders_without_interval(tmp_path):
    html = render(tmp_path, make_records()[:1])
    assert "n/a" in html and "&plusmn; n/a" not in html.split("</p>")[0]


@pytest.mark.parametrize(
    ("seconds", "text"), [(4.25, "4.2 s"), (75, "1 min 15 s"), (3725.4, "1 h 02 min 05 s")]
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_summary_may_be_given_in_its_dict_form(tmp_path):
    records = make_records()
    data = {**summarize_run(records).to_dict(), "duration_s": 4.25}
    path = write_detailed_results(data, records, tmp_path / "d.html")
    html = path.read_text(encoding="utf-8")
    assert html.count('<tr class="task">') == len(records) and "4.2 s" in html
