/** A code editor with syntax highlighting (CodeMirror 6), loaded on demand so the
 * editor's first load does not carry it. */
import { javascript } from '@codemirror/lang-javascript';
import { python } from '@codemirror/lang-python';
import CodeMirror from '@uiw/react-codemirror';
import { useMemo } from 'react';

export default function CodeField({ value, language, onChange, testId }: { value: string; language: string;
  onChange: (value: string) => void; testId?: string }) {
  const extensions = useMemo(() => [language === 'javascript' ? javascript() : python()], [language]);
  return (
    <div className="code-field" data-testid={testId}>
      <CodeMirror value={value} height="220px" extensions={extensions} onChange={onChange}
        basicSetup={{ lineNumbers: true, foldGutter: false }} />
    </div>
  );
}
