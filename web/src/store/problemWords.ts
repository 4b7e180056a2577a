/**
 * Compile problems in the UI language (lib/problemText.ts) with the editor's places: a
 * node's title from the canvas, a field's label from the catalog (the node kind's
 * labels, then the labels of the fields every node has). The node badges' tooltips are
 * worded again when the language changes.
 */
import { useLanguage } from '../i18n';
import { isFlowNode } from '../lib/serialize';
import { problemText, type Places, type ProblemLike } from '../lib/problemText';
import { problemIndex } from '../lib/shape';
import { useCatalog } from './catalog';
import { useEditor } from './editor';

const places: Places = {
  nodeTitle: (id) => {
    const node = useEditor.getState().nodes.find((n) => n.id === id);
    return node && isFlowNode(node) ? node.data.node.name || id : id;
  },
  fieldLabel: (nodeId, name) => {
    const lang = useLanguage.getState().lang;
    const { byKind, nodeFieldLabels } = useCatalog.getState();
    const node = nodeId ? useEditor.getState().nodes.find((n) => n.id === nodeId) : undefined;
    const kind = node && isFlowNode(node) ? byKind[node.data.node.type] : undefined;
    return kind?.labels?.[lang]?.fields?.[name] ?? nodeFieldLabels[lang]?.[name] ?? name;
  },
};

/** `p` as the builder reads it in the current UI language. */
export function problemWords(p: ProblemLike): string {
  return problemText(p, useLanguage.getState().lang, places);
}

/** The problem words of the current language, re-rendering on a language change. */
export function useProblemWords(): (p: ProblemLike) => string {
  useLanguage((s) => s.lang);
  return problemWords;
}

useLanguage.subscribe(() => {
  const { problems } = useEditor.getState();
  if (problems.length) useEditor.setState({ problemIndex: problemIndex(problems, problemWords) });
});
