"""The report as JUnit XML, so that CI servers show each finding as a failed test case.

One test suite per check, one test case per finding (named by what it discloses, with its id); a finding
that does not fail the run (accepted by the baseline, or possible under ``--fail-on certain``) is a
skipped case, and a check with no finding is one passing case; a check that could not see an input it
needs (a worker's, as ``findings`` reads it) has an erroring case ``incomplete``. Built with the standard library's
ElementTree, which escapes every value.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from streamdetect.engine import FailOn, Report


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
            case = ET.SubElement(
                suite, "testcase", classname=f"streamdetect.{summary.name}", name=f"{finding.headline()} [{finding.id}]"
            )
            if finding.id in gating:
                failure = ET.SubElement(case, "failure", message=finding.verdict(), type=finding.check)
                failure.text = str(finding.to_dict())
            else:
                reason = "accepted by the baseline" if finding.id in report.accepted else "possible, not failing"
                ET.SubElement(case, "skipped", message=reason)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
