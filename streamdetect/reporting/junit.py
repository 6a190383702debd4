"""The report as JUnit XML, so that CI servers show each finding as a failed test case.

One test suite per check, one test case per finding (named by what it discloses, with its id); a finding
that does not fail the run (accepted by the baseline, or possible under ``--fail-on certain``) is a
skipped case, and a check with no finding is one passing case; a check that could not see an input it
needs (a worker's, as ``findings`` reads it) has an erroring case ``incomplete``. Built with the standard library's
ElementTree, which escapes every value.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from streamdetect.checks.findings import AssociationCoverFinding, GroupFinding, LinkageFinding, SindFinding
from streamdetect.engine import FailOn, Finding, Report
from streamdetect.reporting.document import value_text


def _name(finding: Finding) -> str:
    if isinstance(finding, (LinkageFinding, AssociationCoverFinding)):
        values = ", ".join(value_text(v) for v in finding.sensitive_values)
        return (
            f"{finding.identifier_attribute}={value_text(finding.identifier_value)} -> "
            f"{finding.sensitive_attribute} {{{values}}} via {{{', '.join(finding.views)}}} [{finding.id}]"
        )
    if isinstance(finding, GroupFinding):
        group = ", ".join(f"{name}={value_text(value)}" for name, value in finding.group)
        return f"{finding.relation or 'table'}: {{{group}}} [{finding.id}]"
    assert isinstance(finding, SindFinding)
    return f"{finding.sensitive_attribute}: class of {len(finding.members)} [{finding.id}]"


def _message(finding: Finding) -> str:
    if isinstance(finding, LinkageFinding):
        kind = "possible link" if not finding.certain else ("total disclosure" if finding.total else "partial")
        return f"{kind} at level {finding.level}, joined on {', '.join(finding.joined_on) or 'one view'}"
    if isinstance(finding, AssociationCoverFinding):
        return f"association cover smaller than k = {finding.k}" + ("" if finding.exact else " (conservative)")
    if isinstance(finding, GroupFinding):
        if finding.sensitive_attribute is not None:
            return f"{finding.distinct} distinct {finding.sensitive_attribute} value(s), fewer than l = {finding.k}"
        return f"{finding.count} row(s), fewer than k = {finding.k}"
    return finding.reason


def junit_xml(report: Report, fail_on: FailOn = "any") -> str:
    """The JUnit XML document (one ``testsuites`` root)."""
    gating = {finding.id for finding in report.gating(fail_on)}
    root = ET.Element("testsuites", name=f"streamdetect {report.topology}")
    for summary in report.checks:
        findings = [f for f in report.findings if f.check == summary.name]
        failures = sum(1 for f in findings if f.id in gating)
        blind = report.incomplete.get(summary.name)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{report.topology}.{summary.name}",
            tests=str(max(1, len(findings)) + (1 if blind is not None and findings else 0)),
            failures=str(failures),
            errors=str(1 if blind is not None else 0),
            skipped=str(len(findings) - failures),
        )
        if blind is not None:  # a check that could not see its input is never a passing case
            case = ET.SubElement(suite, "testcase", classname=f"streamdetect.{summary.name}", name="incomplete")
            ET.SubElement(case, "error", message=blind, type="incomplete")
        elif not findings:
            ET.SubElement(suite, "testcase", classname=f"streamdetect.{summary.name}", name="no disclosure")
        for finding in findings:
            case = ET.SubElement(suite, "testcase", classname=f"streamdetect.{summary.name}", name=_name(finding))
            if finding.id in gating:
                failure = ET.SubElement(case, "failure", message=_message(finding), type=finding.check)
                failure.text = str(finding.to_dict())
            else:
                reason = "accepted by the baseline" if finding.id in report.accepted else "possible, not failing"
                ET.SubElement(case, "skipped", message=reason)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
